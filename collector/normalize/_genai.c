/* genai.read for the spans most traffic is made of, in one pass and without a Draft: spans that only the GenAI
 * conventions read (no other convention's marker) and that carry none of the keys whose values need parsing
 * (tool results, OpenInference-style input and output, output messages, indexed completions, finish reasons as a
 * JSON string). For those, `values` returns the Draft's slots as genai.read fills them; for any other span it
 * returns None and the caller reads it in Python. genai.read is the reference: the keys, operation names, kinds,
 * slots and bits all come from genai.SPEC (`configure`), and tests compare the two on every span they have. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* keys */
static PyObject *k_operation, *k_request_model, *k_response_model, *k_agent_name, *k_provider, *k_system,
    *k_tool_name, *k_tool_call_id, *k_finish, *k_legacy_finish, *k_error_type, *k_conversation;
/* tuples of keys, the first present wins */
static PyObject *k_tool_arguments, *k_input_tokens, *k_output_tokens, *k_cache_read, *k_cache_write;
static PyObject *kinds;                     /* operation name -> step kind */
static PyObject *agent_operations, *tool_operations; /* frozensets of operation names */
static PyObject *kind_llm, *kind_tool, *kind_agent, *kind_other;
static PyObject *tool_prefix;               /* of a tool span's name */
static long bit_response_model, bit_agent_name, bit_request_model, bit_arguments, bit_cache_tokens, bit_finish,
    bit_error, bit_conversation, bits_out_of_scope;
static Py_ssize_t f_kind, f_agent, f_model, f_provider, f_tool, f_call_id, f_conversation, f_args, f_input,
    f_output, f_cache_read, f_cache_write, f_finish, f_error_type, n_fields;
static int configured;
static PyObject *scratch; /* owned: the list `values` fills again (slots_list) */

/* The kinds of the operation names seen last, by address: the decoder shares the str of a short value from span to
 * span, so a name is mostly the very object seen before, and looking it up in `kinds` would compare texts. */
#define KIND_CACHE 16 /* a power of two */
static PyObject *cached_ops[KIND_CACHE]; /* owned: an address is not reused while its str is kept */
static PyObject *cached_kinds[KIND_CACHE]; /* owned */

static void
forget_kinds(void)
{
    for (int i = 0; i < KIND_CACHE; i++) {
        Py_CLEAR(cached_ops[i]);
        Py_CLEAR(cached_kinds[i]);
    }
}

/* The kind of operation `op` (a str; borrowed), NULL on error. */
static PyObject *
kind_of(PyObject *op)
{
    size_t i = ((uintptr_t)op >> 4) & (KIND_CACHE - 1);
    PyObject *kind;
    if (cached_ops[i] == op) {
        return cached_kinds[i];
    }
    kind = PyDict_GetItemWithError(kinds, op);
    if (kind == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        kind = kind_other;
    }
    Py_INCREF(op);
    Py_INCREF(kind);
    Py_XSETREF(cached_ops[i], op);
    Py_XSETREF(cached_kinds[i], kind);
    return kind;
}

static PyObject *
spec_item(PyObject *spec, const char *name, PyTypeObject *type)
{
    PyObject *value = PyDict_GetItemString(spec, name);
    if (value == NULL) {
        PyErr_Format(PyExc_KeyError, "genai spec has no %s", name);
        return NULL;
    }
    if (type != NULL && !PyObject_TypeCheck(value, type)) {
        PyErr_Format(PyExc_TypeError, "genai spec: %s must be %s", name, type->tp_name);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

static int
spec_int(PyObject *spec, const char *name, long *out)
{
    PyObject *value = spec_item(spec, name, &PyLong_Type);
    if (value == NULL) {
        return -1;
    }
    *out = PyLong_AsLong(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
spec_slot(PyObject *spec, const char *name, Py_ssize_t *out)
{
    long value;
    if (spec_int(spec, name, &value) < 0) {
        return -1;
    }
    if (value < 0 || value >= n_fields) {
        PyErr_Format(PyExc_ValueError, "genai spec: slot %s out of range", name);
        return -1;
    }
    *out = value;
    return 0;
}

#define TAKE(var, name, type)                                                                                    \
    do {                                                                                                         \
        PyObject *v_ = spec_item(spec, name, type);                                                              \
        if (v_ == NULL) {                                                                                        \
            return NULL;                                                                                         \
        }                                                                                                        \
        Py_XSETREF(var, v_);                                                                                     \
    } while (0)

PyDoc_STRVAR(configure_doc, "configure(spec, /)\n--\n\nThe keys, names, kinds, slots and bits of genai.SPEC.");

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *spec)
{
    long n;
    if (!PyDict_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "configure() takes a dict");
        return NULL;
    }
    configured = 0;
    forget_kinds();
    TAKE(k_operation, "operation", &PyUnicode_Type);
    TAKE(k_request_model, "request_model", &PyUnicode_Type);
    TAKE(k_response_model, "response_model", &PyUnicode_Type);
    TAKE(k_agent_name, "agent_name", &PyUnicode_Type);
    TAKE(k_provider, "provider", &PyUnicode_Type);
    TAKE(k_system, "system", &PyUnicode_Type);
    TAKE(k_tool_name, "tool_name", &PyUnicode_Type);
    TAKE(k_tool_call_id, "tool_call_id", &PyUnicode_Type);
    TAKE(k_finish, "finish_reasons", &PyUnicode_Type);
    TAKE(k_legacy_finish, "legacy_finish_reason", &PyUnicode_Type);
    TAKE(k_error_type, "error_type", &PyUnicode_Type);
    TAKE(k_conversation, "conversation_id", &PyUnicode_Type);
    TAKE(k_tool_arguments, "tool_arguments", &PyTuple_Type);
    TAKE(k_input_tokens, "input_tokens", &PyTuple_Type);
    TAKE(k_output_tokens, "output_tokens", &PyTuple_Type);
    TAKE(k_cache_read, "cache_read_tokens", &PyTuple_Type);
    TAKE(k_cache_write, "cache_write_tokens", &PyTuple_Type);
    TAKE(kinds, "kinds", &PyDict_Type);
    TAKE(agent_operations, "agent_operations", &PyFrozenSet_Type);
    TAKE(tool_operations, "tool_operations", &PyFrozenSet_Type);
    TAKE(kind_llm, "llm", NULL);
    TAKE(kind_tool, "tool", NULL);
    TAKE(kind_agent, "agent", NULL);
    TAKE(kind_other, "other", NULL);
    TAKE(tool_prefix, "tool_prefix", &PyUnicode_Type);
    if (spec_int(spec, "fields", &n) < 0) {
        return NULL;
    }
    if (n <= 0 || n > 64) {
        PyErr_SetString(PyExc_ValueError, "genai spec: fields out of range");
        return NULL;
    }
    n_fields = n;
    Py_CLEAR(scratch); /* made for the spec before */
    if (spec_slot(spec, "slot_kind", &f_kind) < 0 || spec_slot(spec, "slot_agent", &f_agent) < 0 ||
        spec_slot(spec, "slot_model", &f_model) < 0 || spec_slot(spec, "slot_provider", &f_provider) < 0 ||
        spec_slot(spec, "slot_tool", &f_tool) < 0 || spec_slot(spec, "slot_tool_call_id", &f_call_id) < 0 ||
        spec_slot(spec, "slot_conversation_id", &f_conversation) < 0 || spec_slot(spec, "slot_args", &f_args) < 0 ||
        spec_slot(spec, "slot_input_tokens", &f_input) < 0 || spec_slot(spec, "slot_output_tokens", &f_output) < 0 ||
        spec_slot(spec, "slot_cache_read_tokens", &f_cache_read) < 0 ||
        spec_slot(spec, "slot_cache_write_tokens", &f_cache_write) < 0 ||
        spec_slot(spec, "slot_finish_reasons", &f_finish) < 0 ||
        spec_slot(spec, "slot_error_type", &f_error_type) < 0 ||
        spec_int(spec, "bit_response_model", &bit_response_model) < 0 ||
        spec_int(spec, "bit_agent_name", &bit_agent_name) < 0 ||
        spec_int(spec, "bit_request_model", &bit_request_model) < 0 ||
        spec_int(spec, "bit_arguments", &bit_arguments) < 0 ||
        spec_int(spec, "bit_cache_tokens", &bit_cache_tokens) < 0 || spec_int(spec, "bit_finish", &bit_finish) < 0 ||
        spec_int(spec, "bit_error", &bit_error) < 0 || spec_int(spec, "bit_conversation", &bit_conversation) < 0 ||
        spec_int(spec, "bits_out_of_scope", &bits_out_of_scope) < 0) {
        return NULL;
    }
    configured = 1;
    Py_RETURN_NONE;
}

/* attrs[key] when present and not None (borrowed), else NULL; -1 on error. */
static int
get(PyObject *attrs, PyObject *key, PyObject **out)
{
    PyObject *value = PyDict_GetItemWithError(attrs, key);
    if (value == NULL && PyErr_Occurred()) {
        return -1;
    }
    *out = value == Py_None ? NULL : value;
    return 0;
}

/* The first of `keys` present and not None (borrowed), else NULL; -1 on error. */
static int
first(PyObject *attrs, PyObject *keys, PyObject **out)
{
    Py_ssize_t i;
    *out = NULL;
    for (i = 0; i < PyTuple_GET_SIZE(keys); i++) {
        if (get(attrs, PyTuple_GET_ITEM(keys, i), out) < 0) {
            return -1;
        }
        if (*out != NULL) {
            break;
        }
    }
    return 0;
}

/* values[slot] = value (a new reference, or NULL: an error). */
static int
put(PyObject *values, Py_ssize_t slot, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    Py_SETREF(PyList_GET_ITEM(values, slot), value);
    return 0;
}

/* values[slot] = str(value) (value borrowed; a str is itself). */
static int
put_str(PyObject *values, Py_ssize_t slot, PyObject *value)
{
    return put(values, slot, PyUnicode_CheckExact(value) ? Py_NewRef(value) : PyObject_Str(value));
}

/* values[slot] = value (borrowed). */
static int
put_ref(PyObject *values, Py_ssize_t slot, PyObject *value)
{
    Py_INCREF(value);
    return put(values, slot, value);
}

/* Where the rest of `name` starts when `name` starts with `prefix` followed by `sep` (0: by anything); 0 when it does
 * not; -1 on error. */
static Py_ssize_t
prefix_end(PyObject *name, PyObject *prefix, Py_UCS4 sep)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(prefix), end = sep ? n + 1 : n, found;
    if (PyUnicode_GET_LENGTH(name) < end || (sep && PyUnicode_READ_CHAR(name, n) != sep)) {
        return 0;
    }
    found = PyUnicode_Tailmatch(name, prefix, 0, n, -1);
    return found < 0 ? -1 : found ? end : 0;
}

/* `a or b` over two lookups: a unless it is missing or false (b_key NULL: b is missing). */
static int
either(PyObject *attrs, PyObject *a_key, PyObject *a, PyObject *b_key, PyObject **out)
{
    int truth;
    if (a_key != NULL && get(attrs, a_key, &a) < 0) {
        return -1;
    }
    if (a != NULL) {
        truth = PyObject_IsTrue(a);
        if (truth < 0) {
            return -1;
        }
        if (truth) {
            *out = a;
            return 0;
        }
    }
    *out = NULL;
    return b_key == NULL ? 0 : get(attrs, b_key, out);
}

PyDoc_STRVAR(values_doc,
             "values(attrs, name, present, /)\n--\n\n"
             "The Draft's slots as genai.read fills them for a span only the GenAI conventions read (`present`: its "
             "bits of genai.OPTIONAL); None when the span needs genai.read itself.");

/* A list of n_fields Nones. The caller reads a span's values and drops them before the next span, so the list of
 * the last call is filled again when nothing else holds it (one list allocated and freed per span was a share of
 * every span's cost); one still held elsewhere is left to its holder and a new one made. */
static PyObject *
slots_list(void)
{
    PyObject *out;
    Py_ssize_t i;
    if (scratch != NULL && Py_REFCNT(scratch) == 1) {
        for (i = 0; i < n_fields; i++) {
            if (PyList_GET_ITEM(scratch, i) != Py_None) {
                Py_SETREF(PyList_GET_ITEM(scratch, i), Py_NewRef(Py_None));
            }
        }
        return Py_NewRef(scratch);
    }
    out = PyList_New(n_fields);
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n_fields; i++) {
        PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
    }
    Py_XSETREF(scratch, Py_NewRef(out));
    return out;
}

static PyObject *
values(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *attrs, *name, *out, *op, *kind = NULL, *value = NULL;
    long present;
    Py_ssize_t end;
    int agentish = 0, found;

    if (nargs != 3 || !PyDict_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "values() takes a dict, a str and an int");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_genai is not configured");
        return NULL;
    }
    attrs = args[0];
    name = args[1];
    present = PyLong_AsLong(args[2]);
    if (present == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (present & bits_out_of_scope) {
        Py_RETURN_NONE;
    }
    if (get(attrs, k_operation, &op) < 0) {
        return NULL;
    }
    if (op != NULL && !PyUnicode_CheckExact(op)) {
        Py_RETURN_NONE; /* an odd operation name: genai.read knows what to make of it */
    }
    if (present & bit_finish) { /* decided before anything is made */
        if (get(attrs, k_finish, &value) < 0) {
            return NULL;
        }
        if (value != NULL && PyUnicode_CheckExact(value)) {
            Py_RETURN_NONE; /* a JSON text to parse */
        }
        if (value == NULL) {
            found = PyDict_Contains(attrs, k_legacy_finish);
            if (found < 0) {
                return NULL;
            }
            if (found) {
                Py_RETURN_NONE; /* OpenLLMetry's indexed completions */
            }
        }
    }
    out = slots_list();
    if (out == NULL) {
        return NULL;
    }
    if (value != NULL && put_ref(out, f_finish, value) < 0) {
        goto error;
    }

    /* the kind: from the operation name, else from the keys present */
    if (op != NULL) {
        kind = kind_of(op);
        if (kind == NULL) {
            goto error;
        }
    }
    else {
        found = PyDict_Contains(attrs, k_request_model);
        if (found < 0) {
            goto error;
        }
        if (found) {
            kind = kind_llm;
        }
        else {
            found = PyDict_Contains(attrs, k_tool_name);
            if (found < 0) {
                goto error;
            }
            kind = found ? kind_tool : NULL;
        }
    }
    if (kind != NULL && put_ref(out, f_kind, kind) < 0) {
        goto error;
    }

    /* the agent: its name, else an agent operation's span name `{operation} {agent}` */
    value = NULL;
    if (present & bit_agent_name && get(attrs, k_agent_name, &value) < 0) {
        goto error;
    }
    if (value != NULL) {
        if (put_str(out, f_agent, value) < 0) {
            goto error;
        }
    }
    else if (op != NULL) {
        agentish = PySet_Contains(agent_operations, op);
        if (agentish < 0) {
            goto error;
        }
        end = agentish ? prefix_end(name, op, ' ') : 0;
        if (end < 0 || (end > 0 && put(out, f_agent, PyUnicode_Substring(name, end, PyUnicode_GET_LENGTH(name))) < 0)) {
            goto error;
        }
    }

    /* the model: the response's unless false, else the request's; the provider: its name, else the system */
    value = NULL;
    if (present & bit_response_model && get(attrs, k_response_model, &value) < 0) {
        goto error;
    }
    if (either(attrs, NULL, value, present & bit_request_model ? k_request_model : NULL, &value) < 0) {
        goto error;
    }
    if (value != NULL && put_str(out, f_model, value) < 0) {
        goto error;
    }
    if (either(attrs, k_provider, NULL, k_system, &value) < 0) {
        goto error;
    }
    if (value != NULL && put_str(out, f_provider, value) < 0) {
        goto error;
    }

    if (kind != kind_llm && kind != kind_agent) { /* a tool call, or not known yet */
        if (get(attrs, k_tool_name, &value) < 0) {
            goto error;
        }
        if (value != NULL) {
            if (put_str(out, f_tool, value) < 0) {
                goto error;
            }
        }
        else if (op != NULL) {
            found = PySet_Contains(tool_operations, op);
            if (found < 0) {
                goto error;
            }
            if (found) { /* the span name is `execute_tool {name}`, or just the tool's name */
                Py_ssize_t n = PyUnicode_GET_LENGTH(name);
                end = prefix_end(name, tool_prefix, 0);
                if (end < 0 || put(out, f_tool, end > 0 && end < n ? PyUnicode_Substring(name, end, n)
                                                                      : Py_NewRef(name)) < 0) {
                    goto error;
                }
            }
        }
        if (get(attrs, k_tool_call_id, &value) < 0) {
            goto error;
        }
        if (value != NULL && put_str(out, f_call_id, value) < 0) {
            goto error;
        }
        value = NULL;
        if (present & bit_arguments && first(attrs, k_tool_arguments, &value) < 0) {
            goto error;
        }
        if (value != NULL && put_ref(out, f_args, value) < 0) {
            goto error;
        }
    }
    if (kind != kind_tool && kind != kind_agent) { /* a model call, or not known yet */
        if (first(attrs, k_input_tokens, &value) < 0 || (value != NULL && put_ref(out, f_input, value) < 0)) {
            goto error;
        }
        if (first(attrs, k_output_tokens, &value) < 0 || (value != NULL && put_ref(out, f_output, value) < 0)) {
            goto error;
        }
        if (present & bit_cache_tokens) {
            if (first(attrs, k_cache_read, &value) < 0 || (value != NULL && put_ref(out, f_cache_read, value) < 0)) {
                goto error;
            }
            if (first(attrs, k_cache_write, &value) < 0 ||
                (value != NULL && put_ref(out, f_cache_write, value) < 0)) {
                goto error;
            }
        }
    }
    if (present & bit_error) {
        if (get(attrs, k_error_type, &value) < 0 || (value != NULL && put_str(out, f_error_type, value) < 0)) {
            goto error;
        }
    }
    if (present & bit_conversation) {
        if (get(attrs, k_conversation, &value) < 0 || (value != NULL && put_str(out, f_conversation, value) < 0)) {
            goto error;
        }
    }
    return out;

error:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_O, configure_doc},
    {"values", (PyCFunction)(void (*)(void))values, METH_FASTCALL, values_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_genai", "genai.read in C for the spans only the GenAI conventions read.", 0, methods,
};

PyMODINIT_FUNC
PyInit__genai(void)
{
    return PyModule_Create(&module);
}
