/* Text primitives that run over whole pieces of content (tool results, model outputs), where Python's str methods
 * would split a text into a list of words to put it back together. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Whether c separates words for str.split(): the same test. */
#define SPACE(c) Py_UNICODE_ISSPACE(c)

/* The index of the first character that collapsing changes: a whitespace character other than a single space
 * between words, or n if there is none. */
#define FIRST_CHANGE(T)                                                                                          \
    do {                                                                                                         \
        const T *s = (const T *)data;                                                                            \
        int after_space = 1; /* a space at the start changes */                                                  \
        for (i = 0; i < n; i++) {                                                                                \
            Py_UCS4 c = s[i];                                                                                    \
            if (c > ' ' && c < 0x80) {                                                                           \
                after_space = 0;                                                                                 \
            }                                                                                                    \
            else if (SPACE(c)) {                                                                                 \
                if (c != ' ' || after_space) {                                                                   \
                    break;                                                                                       \
                }                                                                                                \
                after_space = 1;                                                                                 \
            }                                                                                                    \
            else {                                                                                               \
                after_space = 0;                                                                                 \
            }                                                                                                    \
        }                                                                                                        \
        if (i == n && n > 0 && after_space) { /* a space at the end */                                           \
            i = n - 1;                                                                                           \
        }                                                                                                        \
    } while (0)

/* From the first change on: each whitespace run as one space, none at the ends. */
#define COLLAPSE(T)                                                                                              \
    do {                                                                                                         \
        const T *s = (const T *)data;                                                                            \
        T *o = (T *)out;                                                                                         \
        Py_ssize_t j = i;                                                                                        \
        memcpy(o, s, (size_t)i * sizeof(T));                                                                     \
        int pending = 0; /* a run of whitespace seen after a word */                                             \
        if (j > 0 && o[j - 1] == ' ') { /* the kept prefix ends with the space of the run that changes */        \
            j--;                                                                                                 \
            pending = 1;                                                                                         \
        }                                                                                                        \
        for (; i < n; i++) {                                                                                     \
            T c = s[i];                                                                                          \
            if (SPACE(c)) {                                                                                      \
                pending = j > 0;                                                                                 \
            }                                                                                                    \
            else {                                                                                               \
                if (pending) {                                                                                   \
                    o[j++] = ' ';                                                                                \
                    pending = 0;                                                                                 \
                }                                                                                                \
                o[j++] = c;                                                                                      \
            }                                                                                                    \
        }                                                                                                        \
        len = j;                                                                                                 \
    } while (0)

PyDoc_STRVAR(collapse_doc,
             "collapse(text, /)\n--\n\n"
             "`\" \".join(text.split())`: each whitespace run as one space, none at the ends, in one pass. A text\n"
             "with nothing to collapse is returned itself.");

static PyObject *
collapse(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        return PyErr_Format(PyExc_TypeError, "collapse() takes a str, not %.100s", Py_TYPE(text)->tp_name);
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, len;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        FIRST_CHANGE(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        FIRST_CHANGE(Py_UCS2);
        break;
    default:
        FIRST_CHANGE(Py_UCS4);
    }
    if (i == n) {
        return Py_NewRef(text);
    }
    void *out = PyMem_Malloc((size_t)n * (size_t)kind + 1);
    if (out == NULL) {
        return PyErr_NoMemory();
    }
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        COLLAPSE(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        COLLAPSE(Py_UCS2);
        break;
    default:
        COLLAPSE(Py_UCS4);
    }
    /* the narrowest kind for what is left (whitespace taken out may have been the widest characters) */
    PyObject *result = PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"collapse", collapse, METH_O, collapse_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_text", "Text primitives over whole pieces of content.", 0, methods,
};

PyMODINIT_FUNC
PyInit__text(void)
{
    return PyModule_Create(&module);
}
