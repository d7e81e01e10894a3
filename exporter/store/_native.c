/* Rows as ClickHouse Native blocks (columnar: for each column its name, its type and its values), and blocks of the
 * same columns merged into one. ClickHouse parses a Native block several times faster than the same rows as JSON,
 * but pays a fixed cost per block: the processor writes a block per batch of verdicts, the store's writer merges a
 * batch's blocks into one per table before inserting it.
 *
 * A column is (prefix, kind): its name and type already written as Native strings, and how its values are written
 * (the module's constants name the kinds):
 *   0 String (a str; also LowCardinality(String) columns: ClickHouse converts)   1 Array(String) (a list or tuple of str)
 *   2 Int64 (an int: DateTime64(9) ticks, saturated to the Int64 range)          3 UInt32 (an int, saturated)
 *   4 UInt64 (an int)   5 Float32   6 Float64 (a float or an int)   7 Nullable(Float32) (None or a float)
 *   8 Bool (an int or a bool: one byte, 1 for a true value) */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { STRING, ARRAY_STRING, INT64, UINT32, UINT64, FLOAT32, FLOAT64, NULLABLE_FLOAT32, BOOL, KINDS };

/* Bytes being written, in the bytes object that is returned (no copy at the end). */
typedef struct {
    PyObject *obj;
    char *data;
    size_t size, room;
} Buffer;

static int
reserve(Buffer *b, size_t more)
{
    if (b->size + more <= b->room) {
        return 0;
    }
    size_t room = b->room ? b->room : 4096;
    while (room < b->size + more) {
        room *= 2;
    }
    if (room > PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->obj == NULL) {
        b->obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)room);
    }
    else if (_PyBytes_Resize(&b->obj, (Py_ssize_t)room) < 0) { /* sets b->obj to NULL */
        return -1;
    }
    if (b->obj == NULL) {
        return -1;
    }
    b->data = PyBytes_AS_STRING(b->obj);
    b->room = room;
    return 0;
}

/* Bytes into room already reserved. */
static inline void
append(Buffer *b, const void *data, size_t size)
{
    memcpy(b->data + b->size, data, size);
    b->size += size;
}

/* A varint (at most 10 bytes) into room already reserved. */
static inline void
append_varint(Buffer *b, uint64_t n)
{
    while (n >= 0x80) {
        b->data[b->size++] = (char)(n | 0x80);
        n >>= 7;
    }
    b->data[b->size++] = (char)n;
}

static int
put(Buffer *b, const void *data, size_t size)
{
    if (reserve(b, size) < 0) {
        return -1;
    }
    append(b, data, size);
    return 0;
}

static int
put_varint(Buffer *b, uint64_t n)
{
    if (reserve(b, 10) < 0) {
        return -1;
    }
    append_varint(b, n);
    return 0;
}

static PyObject *
finish(Buffer *b)
{
    if (b->obj == NULL) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    if (_PyBytes_Resize(&b->obj, (Py_ssize_t)b->size) < 0) {
        return NULL;
    }
    return b->obj;
}

#define MAX_COLUMNS 64

/* The arguments (columns, a list): the columns' kinds into `kinds`. `what` names the list in errors. */
static int
arguments(PyObject *const *args, Py_ssize_t nargs, const char *what, int *kinds)
{
    if (nargs != 2 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) > MAX_COLUMNS || !PyList_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "takes the columns (a tuple of (prefix bytes, kind) pairs) and a list of %s",
                     what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[0]); i++) {
        PyObject *column = PyTuple_GET_ITEM(args[0], i);
        if (!PyTuple_Check(column) || PyTuple_GET_SIZE(column) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(column, 0)) ||
            !PyLong_Check(PyTuple_GET_ITEM(column, 1))) {
            PyErr_SetString(PyExc_TypeError, "columns: a tuple of (prefix bytes, kind) pairs");
            return -1;
        }
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(column, 1));
        if (kind < 0 || kind >= KINDS) {
            PyErr_Format(PyExc_ValueError, "column %zd: no kind %ld", i, kind);
            return -1;
        }
        kinds[i] = (int)kind;
    }
    return 0;
}

static int
put_prefix(Buffer *b, PyObject *columns, Py_ssize_t i)
{
    PyObject *prefix = PyTuple_GET_ITEM(PyTuple_GET_ITEM(columns, i), 0);
    return put(b, PyBytes_AS_STRING(prefix), (size_t)PyBytes_GET_SIZE(prefix));
}

static int
put_str(Buffer *b, PyObject *value, Py_ssize_t row, Py_ssize_t column)
{
    Py_ssize_t size;
    const char *text;
    if (!PyUnicode_Check(value) || (text = PyUnicode_AsUTF8AndSize(value, &size)) == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "row %zd, column %zd: a str, not %.100s", row, column,
                         Py_TYPE(value)->tp_name);
        }
        return -1;
    }
    if (reserve(b, 10 + (size_t)size) < 0) { /* the length's varint and the bytes */
        return -1;
    }
    append_varint(b, (uint64_t)size);
    append(b, text, (size_t)size);
    return 0;
}

static PyObject *
strings_of(PyObject *value, Py_ssize_t row, Py_ssize_t column)
{
    if (!PyList_Check(value) && !PyTuple_Check(value)) {
        PyErr_Format(PyExc_TypeError, "row %zd, column %zd: a list of str, not %.100s", row, column,
                     Py_TYPE(value)->tp_name);
        return NULL;
    }
    return value;
}

/* A number into room already reserved (put_column reserves a fixed-width column's bytes at once). */
static int
put_number(Buffer *b, int kind, PyObject *value, Py_ssize_t row, Py_ssize_t column)
{
    int overflow = 0;
    switch (kind) {
    case INT64:
    case UINT32: {
        if (!PyLong_Check(value)) {
            break;
        }
        long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (n == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow) {
            n = overflow > 0 ? LLONG_MAX : LLONG_MIN;
        }
        if (kind == INT64) {
            int64_t v = (int64_t)n;
            append(b, &v, 8);
            return 0;
        }
        uint32_t v = n < 0 ? 0 : n > (long long)UINT32_MAX ? UINT32_MAX : (uint32_t)n;
        append(b, &v, 4);
        return 0;
    }
    case UINT64: {
        if (!PyLong_Check(value)) {
            break;
        }
        uint64_t v = PyLong_AsUnsignedLongLong(value);
        if (v == (uint64_t)-1 && PyErr_Occurred()) {
            return -1;
        }
        append(b, &v, 8);
        return 0;
    }
    case FLOAT32:
    case FLOAT64: {
        double d;
        if (PyFloat_CheckExact(value)) {
            d = PyFloat_AS_DOUBLE(value);
        }
        else if (PyFloat_Check(value) || PyLong_Check(value)) {
            d = PyFloat_AsDouble(value);
            if (d == -1.0 && PyErr_Occurred()) {
                return -1;
            }
        }
        else {
            break;
        }
        if (kind == FLOAT64) {
            append(b, &d, 8);
            return 0;
        }
        float f = (float)d;
        append(b, &f, 4);
        return 0;
    }
    case BOOL: {
        if (!PyLong_Check(value)) {
            PyErr_Format(PyExc_TypeError, "row %zd, column %zd: a bool, not %.100s", row, column,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        int truth = PyObject_IsTrue(value);
        if (truth < 0) {
            return -1;
        }
        b->data[b->size++] = (char)truth;
        return 0;
    }
    }
    PyErr_Format(PyExc_TypeError, "row %zd, column %zd: a number, not %.100s", row, column, Py_TYPE(value)->tp_name);
    return -1;
}

static const size_t WIDTHS[KINDS] = {0, 0, 8, 4, 8, 4, 8, 4, 1};

/* One column of `rows` (each a list or tuple of the columns' values). */
static int
put_column(Buffer *b, int kind, PyObject *rows, Py_ssize_t column)
{
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (reserve(b, (size_t)n * (WIDTHS[kind] + (kind == ARRAY_STRING ? 8 : kind == NULLABLE_FLOAT32 ? 1 : 0))) < 0) {
        return -1;
    }
    switch (kind) {
    case STRING:
        for (Py_ssize_t r = 0; r < n; r++) {
            if (put_str(b, PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column), r, column) < 0) {
                return -1;
            }
        }
        return 0;
    case ARRAY_STRING: {
        uint64_t offset = 0;
        for (Py_ssize_t r = 0; r < n; r++) { /* the offsets, then the strings */
            PyObject *items = strings_of(PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column), r, column);
            if (items == NULL) {
                return -1;
            }
            offset += (uint64_t)PySequence_Fast_GET_SIZE(items);
            append(b, &offset, 8); /* reserved above */
        }
        for (Py_ssize_t r = 0; r < n; r++) {
            PyObject *items = PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column);
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
                if (put_str(b, PySequence_Fast_GET_ITEM(items, i), r, column) < 0) {
                    return -1;
                }
            }
        }
        return 0;
    }
    case NULLABLE_FLOAT32:
        for (Py_ssize_t r = 0; r < n; r++) { /* the null map, then the values (0 where null) */
            b->data[b->size++] = PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column) == Py_None;
        }
        for (Py_ssize_t r = 0; r < n; r++) {
            PyObject *value = PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column);
            if (value == Py_None) {
                static const float zero = 0;
                append(b, &zero, 4);
            }
            else if (put_number(b, FLOAT32, value, r, column) < 0) {
                return -1;
            }
        }
        return 0;
    default:
        for (Py_ssize_t r = 0; r < n; r++) {
            if (put_number(b, kind, PySequence_Fast_GET_ITEM(PyList_GET_ITEM(rows, r), column), r, column) < 0) {
                return -1;
            }
        }
        return 0;
    }
}

PyDoc_STRVAR(encode_doc, "encode(columns, rows, /)\n--\n\n"
                         "`rows` (a list of lists of the columns' values) as one Native block; b\"\" for no rows.");

static PyObject *
encode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    int kinds[MAX_COLUMNS];
    if (arguments(args, nargs, "rows", kinds) < 0) {
        return NULL;
    }
    PyObject *columns = args[0], *rows = args[1];
    if (PyList_GET_SIZE(rows) == 0) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    Py_ssize_t ncolumns = PyTuple_GET_SIZE(columns);
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!(PyList_Check(row) || PyTuple_Check(row)) || PySequence_Fast_GET_SIZE(row) < ncolumns) {
            PyErr_Format(PyExc_TypeError, "row %zd: a list of every column's value", r);
            return NULL;
        }
    }
    Buffer b = {NULL, NULL, 0, 0};
    if (put_varint(&b, (uint64_t)ncolumns) < 0 || put_varint(&b, (uint64_t)PyList_GET_SIZE(rows)) < 0) {
        goto error;
    }
    for (Py_ssize_t c = 0; c < ncolumns; c++) {
        if (put_prefix(&b, columns, c) < 0 || put_column(&b, kinds[c], rows, c) < 0) {
            goto error;
        }
    }
    return finish(&b);
error:
    Py_XDECREF(b.obj);
    return NULL;
}

/* Reading blocks back (to merge them): a cursor over one block's bytes. */
typedef struct {
    const unsigned char *p, *end;
} Cursor;

static int
malformed(void)
{
    PyErr_SetString(PyExc_ValueError, "a malformed Native block");
    return -1;
}

static int
get_varint(Cursor *c, uint64_t *n)
{
    *n = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) {
            return malformed();
        }
        unsigned char byte = *c->p++;
        *n |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            return 0;
        }
    }
    return malformed();
}

static int
skip(Cursor *c, uint64_t size)
{
    if ((uint64_t)(c->end - c->p) < size) {
        return malformed();
    }
    c->p += size;
    return 0;
}

static int
skip_strings(Cursor *c, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t size;
        if (get_varint(c, &size) < 0 || skip(c, size) < 0) {
            return -1;
        }
    }
    return 0;
}

typedef struct {
    const unsigned char *data; /* the column's values */
    size_t size;
    size_t head; /* Array: bytes of the offsets; Nullable: of the null map (the rest: the values) */
    uint64_t items; /* Array: its strings in all */
} Part;

/* The values of one column of `rows` rows at the cursor, as a Part (the cursor moves past them). */
static int
read_part(Cursor *c, int kind, uint64_t rows, Part *part)
{
    const unsigned char *start = c->p;
    part->head = 0;
    part->items = 0;
    switch (kind) {
    case STRING:
        if (skip_strings(c, rows) < 0) {
            return -1;
        }
        break;
    case ARRAY_STRING:
        if (rows > (uint64_t)(c->end - c->p) / 8) {
            return malformed();
        }
        if (rows) {
            memcpy(&part->items, c->p + (rows - 1) * 8, 8);
        }
        part->head = rows * 8;
        if (skip(c, rows * 8) < 0 || skip_strings(c, part->items) < 0) {
            return -1;
        }
        break;
    case NULLABLE_FLOAT32:
        part->head = rows;
        if (rows > (uint64_t)(c->end - c->p) / 5 || skip(c, rows * 5) < 0) {
            return malformed();
        }
        break;
    default: {
        uint64_t width = WIDTHS[kind];
        if (rows > (uint64_t)(c->end - c->p) / width || skip(c, rows * width) < 0) {
            return malformed();
        }
    }
    }
    part->data = start;
    part->size = (size_t)(c->p - start);
    return 0;
}

/* One column's parts, in the order of their blocks, as one. */
static int
put_parts(Buffer *b, int kind, Part *parts, Py_ssize_t n)
{
    if (kind == ARRAY_STRING) { /* each block's offsets moved by the strings of the blocks before it */
        uint64_t base = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (reserve(b, parts[i].head) < 0) {
                return -1;
            }
            for (size_t at = 0; at < parts[i].head; at += 8) {
                uint64_t offset;
                memcpy(&offset, parts[i].data + at, 8);
                offset += base;
                append(b, &offset, 8);
            }
            base += parts[i].items;
        }
    }
    else if (kind == NULLABLE_FLOAT32) {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (put(b, parts[i].data, parts[i].head) < 0) {
                return -1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (put(b, parts[i].data + parts[i].head, parts[i].size - parts[i].head) < 0) {
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(merge_doc, "merge(columns, blocks, /)\n--\n\n"
                        "Native blocks of `columns` (bytes each: encode's, several concatenated, or empty) as one "
                        "block of all their rows, in order; b\"\" for no rows. ValueError: a block is malformed or "
                        "has other columns.");

static PyObject *
merge(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    int kinds[MAX_COLUMNS];
    if (arguments(args, nargs, "blocks", kinds) < 0) {
        return NULL;
    }
    PyObject *columns = args[0], *blocks = args[1];
    Py_ssize_t ncolumns = PyTuple_GET_SIZE(columns), nparts = 0, room = 0;
    Part *parts = NULL; /* [block][column] */
    Buffer b = {NULL, NULL, 0, 0};
    uint64_t rows = 0;
    size_t given = 0; /* the blocks' bytes together */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        if (!PyBytes_Check(block)) {
            PyErr_SetString(PyExc_TypeError, "blocks: a list of bytes");
            goto error;
        }
        given += (size_t)PyBytes_GET_SIZE(block);
        Cursor c = {(const unsigned char *)PyBytes_AS_STRING(block),
                    (const unsigned char *)PyBytes_AS_STRING(block) + PyBytes_GET_SIZE(block)};
        while (c.p < c.end) {
            uint64_t n, block_rows;
            if (get_varint(&c, &n) < 0 || get_varint(&c, &block_rows) < 0) {
                goto error;
            }
            if (n != (uint64_t)ncolumns) {
                PyErr_Format(PyExc_ValueError, "a Native block of %llu columns, not %zd", (unsigned long long)n,
                             ncolumns);
                goto error;
            }
            if (nparts == room) {
                room = room ? room * 2 : 16;
                Part *more = PyMem_Realloc(parts, (size_t)(room * ncolumns) * sizeof(Part));
                if (more == NULL) {
                    PyErr_NoMemory();
                    goto error;
                }
                parts = more;
            }
            for (Py_ssize_t k = 0; k < ncolumns; k++) {
                uint64_t size;
                for (int s = 0; s < 2; s++) { /* name, type */
                    if (get_varint(&c, &size) < 0 || skip(&c, size) < 0) {
                        goto error;
                    }
                }
                if (read_part(&c, kinds[k], block_rows, &parts[nparts * ncolumns + k]) < 0) {
                    goto error;
                }
            }
            nparts++;
            rows += block_rows;
        }
    }
    if (rows == 0) {
        PyMem_Free(parts);
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    /* room for all of it at once: the merged block is shorter than its blocks together */
    if (reserve(&b, given + 20) < 0) {
        goto error;
    }
    Part *column = PyMem_Malloc((size_t)(nparts ? nparts : 1) * sizeof(Part));
    if (column == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (put_varint(&b, (uint64_t)ncolumns) < 0 || put_varint(&b, rows) < 0) {
        PyMem_Free(column);
        goto error;
    }
    for (Py_ssize_t k = 0; k < ncolumns; k++) {
        for (Py_ssize_t i = 0; i < nparts; i++) {
            column[i] = parts[i * ncolumns + k];
        }
        if (put_prefix(&b, columns, k) < 0 || put_parts(&b, kinds[k], column, nparts) < 0) {
            PyMem_Free(column);
            goto error;
        }
    }
    PyMem_Free(column);
    PyMem_Free(parts);
    return finish(&b);
error:
    PyMem_Free(parts);
    Py_XDECREF(b.obj);
    return NULL;
}

PyDoc_STRVAR(string_doc, "string(text, /)\n--\n\n"
                         "`text` as Native writes a String: its UTF-8 length as a varint, then its bytes.");

static PyObject *
string(PyObject *Py_UNUSED(module), PyObject *text)
{
    Buffer b = {NULL, NULL, 0, 0};
    if (put_str(&b, text, 0, 0) < 0) {
        Py_XDECREF(b.obj);
        return NULL;
    }
    return finish(&b);
}

PyDoc_STRVAR(rows_doc, "rows(block, /)\n--\n\n"
                       "The rows of a Native block (its second varint); ValueError: not a block.");

static PyObject *
rows(PyObject *Py_UNUSED(module), PyObject *block)
{
    uint64_t columns, n;
    if (!PyBytes_Check(block)) {
        PyErr_SetString(PyExc_TypeError, "rows() takes bytes");
        return NULL;
    }
    Cursor c = {(const unsigned char *)PyBytes_AS_STRING(block),
                (const unsigned char *)PyBytes_AS_STRING(block) + PyBytes_GET_SIZE(block)};
    if (get_varint(&c, &columns) < 0 || get_varint(&c, &n) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(n);
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL, encode_doc},
    {"merge", (PyCFunction)(void (*)(void))merge, METH_FASTCALL, merge_doc},
    {"string", string, METH_O, string_doc},
    {"rows", rows, METH_O, rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Rows as ClickHouse Native blocks, and blocks merged.", 0, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    static const char *names[KINDS] = {"STRING", "ARRAY_STRING", "INT64", "UINT32", "UINT64", "FLOAT32", "FLOAT64",
                                       "NULLABLE_FLOAT32", "BOOL"};
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    for (int kind = 0; kind < KINDS; kind++) { /* the kinds, by name */
        if (PyModule_AddIntConstant(m, names[kind], kind) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
