/* The loops of content.py that run over every character of a piece of content (tool results, model outputs) or
 * every node of a parsed JSON value: where Python would split a text into a list of words to put it back
 * together, or call a function per node. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

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

/* The index of the first character of text that collapsing changes, n (its length) if none does. */
static Py_ssize_t
first_change(PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i;
    const void *data = PyUnicode_DATA(text);
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        FIRST_CHANGE(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        FIRST_CHANGE(Py_UCS2);
        break;
    default:
        FIRST_CHANGE(Py_UCS4);
    }
    return i;
}

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
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = first_change(text), len;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
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

/* 1 if canonicalising leaves value as it is, 0 if it may not, -1 on error. Exact types only, as content.py's
 * _canonical treats them: a str subclass, say, is left as it is there too. */
static int
canonical(PyObject *value)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(value);
        if (n > 0) {
            Py_UCS4 c = PyUnicode_READ_CHAR(value, 0);
            if (c == '{' || c == '[') { /* JSON inside a string */
                return 0;
            }
        }
        return first_change(value) == n;
    }
    if (type == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(value);
        return !(isfinite(d) && floor(d) == d); /* an integer's float is written as the integer */
    }
    if (type == &PyTuple_Type) { /* written as a list */
        return 0;
    }
    if (type != &PyDict_Type && type != &PyList_Type) {
        return 1;
    }
    if (Py_EnterRecursiveCall(" in content canonical check")) {
        return -1;
    }
    int ok = 1;
    if (type == &PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (ok == 1 && PyDict_Next(value, &pos, &key, &item)) {
            ok = Py_TYPE(key) != &PyUnicode_Type ? 0 : canonical(item);
        }
    }
    else {
        for (Py_ssize_t i = 0; ok == 1 && i < PyList_GET_SIZE(value); i++) {
            ok = canonical(PyList_GET_ITEM(value, i));
        }
    }
    Py_LeaveRecursiveCall();
    return ok;
}

PyDoc_STRVAR(is_canonical_doc,
             "is_canonical(value, /)\n--\n\n"
             "Whether canonicalising leaves a parsed JSON value as it is: every string without whitespace to\n"
             "collapse and not starting with JSON, no float with an integer's value, no tuple, string keys.");

static PyObject *
is_canonical(PyObject *module, PyObject *value)
{
    (void)module;
    int ok = canonical(value);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"collapse", collapse, METH_O, collapse_doc},
    {"is_canonical", is_canonical, METH_O, is_canonical_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_content", "The per-character and per-node loops of content.py.", 0, methods,
};

PyMODINIT_FUNC
PyInit__content(void)
{
    return PyModule_Create(&module);
}
