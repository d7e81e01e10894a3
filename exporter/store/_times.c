/* The store's times as the text of a JSON number: seconds since the epoch with nine decimals (records.seconds). In
 * Python it took two int-to-str conversions, a slice and a join, three times per verdict; here, digits written into a
 * buffer. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyDoc_STRVAR(seconds_text_doc,
             "seconds_text(ns, /)\n--\n\n"
             "`ns` nanoseconds since the epoch as seconds with nine decimals (\"1700000000.000000001\"); None when "
             "`ns` is negative or 2**64 or more.");

static PyObject *
seconds_text(PyObject *Py_UNUSED(module), PyObject *arg)
{
    char buffer[32]; /* 20 digits, the point, 9 decimals */
    char *end = buffer + sizeof buffer;
    char *p = end;
    unsigned long long ns, whole, fraction;
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "seconds_text() takes an int, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    ns = PyLong_AsUnsignedLongLong(arg);
    if (ns == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear(); /* negative or too large: the caller formats it */
        Py_RETURN_NONE;
    }
    whole = ns / 1000000000ULL;
    fraction = ns % 1000000000ULL;
    for (int i = 0; i < 9; i++) {
        *--p = (char)('0' + fraction % 10);
        fraction /= 10;
    }
    *--p = '.';
    do {
        *--p = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole);
    return PyUnicode_FromStringAndSize(p, end - p);
}

static PyMethodDef methods[] = {
    {"seconds_text", seconds_text, METH_O, seconds_text_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_times", "The store's times as JSON number text.", 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__times(void)
{
    return PyModule_Create(&module);
}
