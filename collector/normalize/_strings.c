/* One str object per text for the names steps keep (span names, services, agents, providers, tools, models, error
 * types, finish reasons): buffered steps share them and compare them by identity first. A dict of the texts seen,
 * bounded (they come from untrusted spans: a full one is emptied), behind a small table by address: the decoder
 * shares the str of a short text from span to span, so a text is mostly the very object seen before, and that
 * costs a comparison of addresses instead of a dict lookup. (Not sys.intern: a call through Python's calling
 * convention, and interned strings are immortal in early Python 3.12 releases, where a stream of distinct span
 * names would pile up.) The GIL guards both tables. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define RECENT 256 /* a power of two */
static PyObject *texts;          /* dict: text -> the str that stands for it */
static Py_ssize_t max_texts = 10000;
static PyObject *given[RECENT];  /* owned: an address is not reused while its str is kept */
static PyObject *chosen[RECENT]; /* owned: what given[i] stands for */

static void
forget_recent(void)
{
    for (int i = 0; i < RECENT; i++) {
        Py_CLEAR(given[i]);
        Py_CLEAR(chosen[i]);
    }
}

PyDoc_STRVAR(canonical_doc, "canonical(text, /)\n--\n\nThe one str kept for texts equal to `text`.");

static PyObject *
canonical(PyObject *Py_UNUSED(module), PyObject *text)
{
    size_t i = ((uintptr_t)text >> 4) & (RECENT - 1);
    PyObject *known;
    if (given[i] == text) {
        return Py_NewRef(chosen[i]);
    }
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "canonical() takes a str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    known = PyDict_GetItemWithError(texts, text);
    if (known == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        if (PyDict_GET_SIZE(texts) >= max_texts) {
            PyDict_Clear(texts);
            forget_recent(); /* what it chose is no longer kept */
        }
        if (PyDict_SetItem(texts, text, text) < 0) {
            return NULL;
        }
        known = text;
    }
    Py_INCREF(text);
    Py_XSETREF(given[i], text);
    Py_INCREF(known);
    Py_XSETREF(chosen[i], known);
    return Py_NewRef(known);
}

PyDoc_STRVAR(bound_doc, "bound(max_texts, /)\n--\n\nKeep at most `max_texts` texts (the kept ones are forgotten).");

static PyObject *
bound(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "bound() takes a positive number of texts");
        return NULL;
    }
    max_texts = n;
    PyDict_Clear(texts);
    forget_recent();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(kept_doc, "kept()\n--\n\nHow many texts are kept.");

static PyObject *
kept(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return PyLong_FromSsize_t(PyDict_GET_SIZE(texts));
}

static PyMethodDef methods[] = {
    {"canonical", canonical, METH_O, canonical_doc},
    {"bound", bound, METH_O, bound_doc},
    {"kept", kept, METH_NOARGS, kept_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_strings", "One str object per text for the names steps keep.", 0, methods,
};

PyMODINIT_FUNC
PyInit__strings(void)
{
    if (texts == NULL && (texts = PyDict_New()) == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
