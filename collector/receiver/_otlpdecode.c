/*
 * _otlpdecode: serialized OTLP ExportTraceServiceRequest -> span records, straight from the wire.
 *
 * decode_request(data, record_type) -> (records, rejected) gives exactly what decode.decode_python(data)
 * gives (the protobuf runtime, upb): records are record_type(service, trace_id, span_id, parent_span_id,
 * name, start_ns, end_ns, status_code, attributes, key_marks, version, environment) in wire order (version
 * and environment from the resource, see Resource), spans with invalid ids are
 * counted and left out, and input that upb refuses raises ValueError. key_marks: the OR of the marks
 * configure() gives the keys of the attribute dict (those added from the status and events too).
 *
 * What is matched of upb (checked differentially by tests/test_decode.py):
 *  - every field the schema (opentelemetry-proto v1) knows is checked even where its value is not used:
 *    strings must be valid UTF-8 (proto3), sub-messages must parse, in events, links, scopes, resources
 *    and entity refs too; unknown fields of any number are skipped, their contents unchecked (groups are
 *    walked, as upb does); a known field with an unexpected wire type is an unknown field;
 *  - tags are at most 5 bytes and below 2^32, field number 0 is an error outside a group (allowed inside
 *    an unknown group, as upb does), lengths are at most 5 bytes, varints at most 10 bytes (bits past
 *    64 dropped), wire types 6 and 7 and a stray end-group are errors;
 *  - nesting: 100 levels of sub-messages and groups below the request, as upb's default depth limit;
 *  - a non-repeated field given twice: the last wins for scalars, message fields merge (parsing the
 *    occurrences in turn into the same state); in AnyValue's oneof the last member set wins and an
 *    array_value/kvlist_value set twice in a row appends; string_value_strindex (8) sets the oneof to a
 *    member that converts to None; int32 enums keep the low 32 bits of the varint, bools are "any bit".
 *
 * Attributes added (as decode_python adds them): the status message, when not empty, as
 * "otel.status_description", and the exception.type / .message / .escaped attributes of the span's last event
 * named "exception", each only where the span has no attribute of that name (PyDict_SetDefault, after the
 * span is read) and only for a string (its first `chars` characters, as given to configure) or a bool. Of an
 * event, only those three attributes are made into values (parse_kv); the others are checked (check_msg).
 *
 * Attributes left out: span attributes whose key is one of the keys, or starts with one of the prefixes,
 * given by configure(keys, prefixes, chars, marks) (decode.py passes UNREAD_KEYS / UNREAD_PREFIXES at import,
 * as decode_python leaves them out too) are not put in the attribute dict. The key is matched on its raw bytes
 * (the last key occurrence of the KeyValue, wherever it is) before anything is made of the value, which is
 * then only checked as upb checks it (framing, UTF-8, depth), so what is refused stays the same.
 *
 * count_spans(data) -> int counts the spans of a request from the framing of its three outer levels only (the
 * receiver's check for room in its queue before decoding); what it refuses, decode_request refuses too.
 *
 * Record construction: when record_type is a tuple subclass with 12 _fields (a NamedTuple, which cannot
 * override __new__), the instance is allocated with tp_alloc and filled in place (what tuple.__new__
 * does for a subclass); any other record_type is called with the 12 values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100
#define RECORD_FIELDS 12

typedef const unsigned char *cptr;

typedef struct {
    int depth; /* levels of nesting still allowed */
} Dec;

static PyObject *unknown_service; /* "unknown_service" */
static PyObject *empty_string;    /* "" */

/* What a span takes from its resource: the str of its service.name (unknown_service without one), service.version and
 * deployment environment (deployment.environment.name, else the older deployment.environment), "" without. */
typedef struct {
    PyObject *service;
    PyObject *version;
    PyObject *environment;
} Resource;

/* Attributes added from the status and the last exception event, in the order they are added. */
enum { ADD_EXC_TYPE, ADD_EXC_MESSAGE, ADD_EXC_ESCAPED, ADD_STATUS, ADD_COUNT };
#define EXC_COUNT ADD_STATUS /* the first three come from the exception event */
static const char *const ADDED_KEYS[ADD_COUNT] = {"exception.type", "exception.message", "exception.escaped",
                                                  "otel.status_description"};
static PyObject *added_keys[ADD_COUNT]; /* their str */
static uint64_t added_key_marks[ADD_COUNT]; /* their key marks (see marks_of) */
static Py_ssize_t added_chars = PY_SSIZE_T_MAX; /* strings added are cut to this many characters */

#define SHARED_SLOTS 2048 /* a power of two */
#define SHARED_MAX_BYTES 64
static PyObject *shared_keys[SHARED_SLOTS]; /* see shared_text */
static uint64_t shared_key_marks[SHARED_SLOTS]; /* the marks of shared_keys[i] */
static PyObject *shared_texts[SHARED_SLOTS];

/* Key marks: the bits configure's `marks` dict gives an attribute key (0 for a key it lacks). A span record's
 * marks are those of its attribute keys, OR-ed: which keys normalisation looks for the span has, told once
 * here, where each distinct key is looked up once (shared_text), instead of for every span downstream. */
static PyObject *key_marks; /* dict: str -> int, or NULL */

static uint64_t
marks_of(PyObject *key)
{
    if (key_marks == NULL) {
        return 0;
    }
    PyObject *v = PyDict_GetItemWithError(key_marks, key); /* exact str keys: no error but memory */
    if (v == NULL || !PyLong_Check(v)) {
        PyErr_Clear();
        return 0;
    }
    return PyLong_AsUnsignedLongLongMask(v);
}

/* ---------------------------------------------------------------- errors ---- */

static void *
fail(const char *msg)
{
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, msg);
    }
    return NULL;
}

static void
utf8_error(void)
{
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "invalid UTF-8 in a string field");
    }
}

/* ------------------------------------------------------------- wire reads ---- */

/* A tag: at most 5 bytes and below 2^32. */
static inline cptr
rd_tag(cptr p, cptr end, uint32_t *out)
{
    if (p < end && p[0] < 0x80) {
        *out = p[0];
        return p + 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (p + i >= end) {
            return fail("truncated tag");
        }
        unsigned b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (v > UINT32_MAX) {
                return fail("invalid tag");
            }
            *out = (uint32_t)v;
            return p + i + 1;
        }
    }
    return fail("invalid tag");
}

/* A varint value: at most 10 bytes, bits past 64 dropped. */
static inline cptr
rd_varint(cptr p, cptr end, uint64_t *out)
{
    if (p < end && p[0] < 0x80) {
        *out = p[0];
        return p + 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p + i >= end) {
            return fail("truncated varint");
        }
        unsigned b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return p + i + 1;
        }
    }
    return fail("varint longer than 10 bytes");
}

/* A length prefix (at most 5 bytes) whose payload must lie within [p, end). */
static inline cptr
rd_len(cptr p, cptr end, Py_ssize_t *out)
{
    uint64_t v;
    if (p < end && p[0] < 0x80) {
        v = p[0];
        p += 1;
    }
    else {
        int i;
        v = 0;
        for (i = 0; i < 5; i++) {
            if (p + i >= end) {
                return fail("truncated length");
            }
            unsigned b = p[i];
            v |= (uint64_t)(b & 0x7f) << (7 * i);
            if (!(b & 0x80)) {
                break;
            }
        }
        if (i == 5) {
            return fail("invalid length");
        }
        p += i + 1;
    }
    if (v >= INT32_MAX || v > (uint64_t)(end - p)) {
        return fail("length past end of message");
    }
    *out = (Py_ssize_t)v;
    return p;
}

static inline uint64_t
le64(cptr p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

/* The index (0..7) of the first byte with its high bit set among 8 little-endian bytes; bits: those high
 * bits, not 0. */
static inline int
first_high_byte(cptr s, uint64_t bits)
{
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    (void)s;
    return __builtin_ctzll(bits) >> 3;
#else
    (void)bits;
    int k = 0;
    while (s[k] < 0x80) {
        k++;
    }
    return k;
#endif
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF), as upb and Python check it. Attributes
 * left out are only checked, and can be large: ASCII goes a word at a time (runs past a word 32 bytes at a
 * time), the rest a character at a time. */
static int
utf8_valid(cptr s, Py_ssize_t n)
{
    const uint64_t high = 0x8080808080808080ULL;
    Py_ssize_t i = 0;
    for (;;) {
        for (;;) { /* to the next non-ASCII byte, or the end */
            if (n - i < 8) {
                while (i < n && s[i] < 0x80) {
                    i++;
                }
                break;
            }
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & high) {
                i += first_high_byte(s + i, w & high);
                break;
            }
            i += 8;
            while (n - i >= 32) {
                uint64_t b[4];
                memcpy(b, s + i, 32);
                if ((b[0] | b[1] | b[2] | b[3]) & high) {
                    break;
                }
                i += 32;
            }
        }
        if (i >= n) {
            return 1;
        }
        do { /* non-ASCII characters, up to the next ASCII byte */
            unsigned c = s[i];
            if (c < 0xC2) {
                return 0;
            }
            else if (c < 0xE0) {
                if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) {
                    return 0;
                }
                i += 2;
            }
            else if (c < 0xF0) {
                if (n - i < 3) {
                    return 0;
                }
                unsigned c1 = s[i + 1];
                if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (c == 0xE0 && c1 < 0xA0) ||
                    (c == 0xED && c1 > 0x9F)) {
                    return 0;
                }
                i += 3;
            }
            else if (c < 0xF5) {
                if (n - i < 4) {
                    return 0;
                }
                unsigned c1 = s[i + 1];
                if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80 ||
                    (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) {
                    return 0;
                }
                i += 4;
            }
            else {
                return 0;
            }
        } while (i < n && s[i] >= 0x80);
    }
}

/* A string field's payload (after its tag): its length, then that many bytes of valid UTF-8 (*s, *n). */
static cptr
rd_str(cptr p, cptr end, cptr *s, Py_ssize_t *n)
{
    if (!(p = rd_len(p, end, n))) {
        return NULL;
    }
    if (!utf8_valid(p, *n)) {
        return fail("invalid UTF-8 in a string field");
    }
    *s = p;
    return p + *n;
}

/* ---------------------------------------------------------------- skipping ---- */

static cptr skip_group(Dec *d, cptr p, cptr end, uint32_t fn);

/* The value of a field of wire type wt (not an end-group). */
static cptr
skip_value(Dec *d, cptr p, cptr end, uint32_t fn, uint32_t wt)
{
    uint64_t v;
    Py_ssize_t n;
    switch (wt) {
    case 0:
        return rd_varint(p, end, &v);
    case 1:
        if (end - p < 8) {
            return fail("truncated fixed64");
        }
        return p + 8;
    case 2:
        p = rd_len(p, end, &n);
        return p ? p + n : NULL;
    case 3:
        return skip_group(d, p, end, fn);
    case 5:
        if (end - p < 4) {
            return fail("truncated fixed32");
        }
        return p + 4;
    case 4:
        return fail("unexpected end-group");
    default:
        return fail("invalid wire type");
    }
}

/* An unknown field in a message (after its tag). */
static inline cptr
skip_field(Dec *d, cptr p, cptr end, uint32_t tag)
{
    if ((tag >> 3) == 0) {
        return fail("field number 0");
    }
    return skip_value(d, p, end, tag >> 3, tag & 7);
}

static cptr
skip_group(Dec *d, cptr p, cptr end, uint32_t fn)
{
    if (--d->depth < 0) {
        return fail("nesting too deep");
    }
    while (p < end) {
        uint32_t tag;
        p = rd_tag(p, end, &tag);
        if (!p) {
            return NULL;
        }
        if ((tag & 7) == 4) {
            if ((tag >> 3) != fn) {
                return fail("mismatched end-group");
            }
            d->depth++;
            return p;
        }
        p = skip_value(d, p, end, tag >> 3, tag & 7); /* field number 0 is let through here, as upb does */
        if (!p) {
            return NULL;
        }
    }
    return fail("unterminated group");
}

/* ------------------------------------------------------ validation only ---- */

/* Messages whose contents are only checked: field kinds by field number (1..8). */
enum { M_ANY, M_ARRAY, M_KVLIST, M_KV, M_ENTITYREF, M_SCOPE, M_EVENT, M_LINK, M_STATUS, M_COUNT };
#define F_STR 1
#define F_MSG(t) (2 + (t))

static const unsigned char VSPEC[M_COUNT][9] = {
    [M_ANY] = {0, F_STR, 0, 0, 0, F_MSG(M_ARRAY), F_MSG(M_KVLIST), 0, 0},
    [M_ARRAY] = {0, F_MSG(M_ANY)},
    [M_KVLIST] = {0, F_MSG(M_KV)},
    [M_KV] = {0, F_STR, F_MSG(M_ANY)},
    [M_ENTITYREF] = {0, F_STR, F_STR, F_STR, F_STR},
    [M_SCOPE] = {0, F_STR, F_STR, F_MSG(M_KV)},
    [M_EVENT] = {0, 0, F_STR, F_MSG(M_KV)},
    [M_LINK] = {0, 0, 0, F_STR, F_MSG(M_KV)},
    [M_STATUS] = {0, 0, F_STR},
};

static cptr
check_msg(Dec *d, int type, cptr p, cptr end)
{
    if (--d->depth < 0) {
        return fail("nesting too deep");
    }
    while (p < end) {
        uint32_t tag;
        p = rd_tag(p, end, &tag);
        if (!p) {
            return NULL;
        }
        uint32_t fn = tag >> 3;
        int kind = ((tag & 7) == 2 && fn < 9) ? VSPEC[type][fn] : 0;
        if (kind) {
            Py_ssize_t n;
            p = rd_len(p, end, &n);
            if (!p) {
                return NULL;
            }
            if (kind == F_STR) {
                if (!utf8_valid(p, n)) {
                    return fail("invalid UTF-8 in a string field");
                }
            }
            else if (!check_msg(d, kind - 2, p, p + n)) {
                return NULL;
            }
            p += n;
        }
        else {
            p = skip_field(d, p, end, tag);
            if (!p) {
                return NULL;
            }
        }
    }
    d->depth++;
    return p;
}

/* ------------------------------------------------- attributes left out ---- */

typedef struct {
    const char *s;   /* UTF-8, owned by unread.owner */
    Py_ssize_t n;
    uint64_t head;   /* key_head() of its first min(n, 8) bytes */
    uint64_t mask;   /* the bits of head that count (a prefix shorter than 8 bytes) */
} Name;

/* The keys and the prefixes, each in order of first byte: those starting with byte b are
 * keys[key_first[b] .. key_first[b + 1]) and prefixes[prefix_first[b] .. prefix_first[b + 1]). */
static struct {
    Name *keys;                 /* one PyMem block: the keys, then the prefixes */
    Name *prefixes;
    uint16_t key_first[257];
    uint16_t prefix_first[257];
    uint64_t key_lengths[256];  /* by first byte: bit min(n, 63) set for each key length n */
    Py_ssize_t prefix_min[256]; /* by first byte: the length of the shortest prefix (PY_SSIZE_T_MAX: none) */
    PyObject *owner;            /* tuple of the bytes objects the names point into */
} unread;

/* The first min(n, 8) bytes of s, little-endian. */
static inline uint64_t
key_head(cptr s, Py_ssize_t n)
{
    if (n >= 8) {
        return le64(s);
    }
    uint64_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        h |= (uint64_t)s[i] << (8 * i);
    }
    return h;
}

/* A span attribute key (raw bytes) is one of the attributes left out. Most keys are told apart by their
 * first byte and length, or the first 8 bytes; a few bytes are compared after that. */
static inline int
key_unread(cptr k, Py_ssize_t n)
{
    if (n == 0) {
        return 0;
    }
    unsigned b = k[0];
    int maybe_key = (int)((unread.key_lengths[b] >> (n < 63 ? n : 63)) & 1);
    if (!maybe_key && n < unread.prefix_min[b]) {
        return 0;
    }
    uint64_t h = key_head(k, n);
    for (Py_ssize_t i = unread.prefix_first[b], stop = unread.prefix_first[b + 1]; i < stop; i++) {
        const Name *e = &unread.prefixes[i];
        if (n >= e->n && (h & e->mask) == e->head &&
            (e->n <= 8 || memcmp(k + 8, e->s + 8, (size_t)(e->n - 8)) == 0)) {
            return 1;
        }
    }
    if (maybe_key) {
        for (Py_ssize_t i = unread.key_first[b], stop = unread.key_first[b + 1]; i < stop; i++) {
            const Name *e = &unread.keys[i];
            if (n == e->n && h == e->head && (n <= 8 || memcmp(k + 8, e->s + 8, (size_t)(n - 8)) == 0)) {
                return 1;
            }
        }
    }
    return 0;
}

/* The last key of a KeyValue (contents in [p, end)), wherever it is on the wire (*key NULL: none). Only tags
 * and lengths are read, as parse_kv and check_msg read them (their depth inside the KeyValue is given), so an
 * error here is one they meet too: 0, or -1 on error. */
static int
kv_last_key(int depth, cptr p, cptr end, cptr *key, Py_ssize_t *keylen)
{
    Dec scan = {depth};
    *key = NULL;
    *keylen = 0;
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            return -1;
        }
        if (tag == ((1 << 3) | 2) || tag == ((2 << 3) | 2)) {
            if (!(p = rd_len(p, end, &n))) {
                return -1;
            }
            if (tag == ((1 << 3) | 2)) {
                *key = p;
                *keylen = n;
            }
            p += n;
        }
        else if (!(p = skip_field(&scan, p, end, tag))) {
            return -1;
        }
    }
    return 0;
}

/* Whether a KeyValue (contents in [p, end)) is left out, by its last key: 1 left out, 0 kept, -1 error. */
static int
kv_unread(int depth, cptr p, cptr end)
{
    cptr key;
    Py_ssize_t keylen;
    if (kv_last_key(depth, p, end, &key, &keylen) < 0) {
        return -1;
    }
    return key != NULL && key_unread(key, keylen);
}

static int
name_order(const void *a, const void *b)
{
    return (int)(unsigned char)((const Name *)a)->s[0] - (int)(unsigned char)((const Name *)b)->s[0];
}

/* first[b]: how many of the names (in order of first byte) start with a byte below b. */
static void
index_names(const Name *names, Py_ssize_t count, uint16_t *first)
{
    Py_ssize_t i = 0;
    for (int b = 0; b < 256; b++) {
        while (i < count && (unsigned char)names[i].s[0] < b) {
            i++;
        }
        first[b] = (uint16_t)i;
    }
    first[256] = (uint16_t)count;
}

/* configure(keys, prefixes, chars[, marks]): the span attributes to leave out from now on, the length strings
 * added from the status and events are cut to, and the key marks (a dict of str keys to int bits; when not
 * given, those configured before stay). */
static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "configure(keys, prefixes, chars[, marks]) takes 3 or 4 arguments");
        return NULL;
    }
    if (nargs == 4 && !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(): marks must be a dict of str to int");
        return NULL;
    }
    Py_ssize_t chars = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (chars == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (chars < 0) {
        PyErr_SetString(PyExc_ValueError, "configure(): chars must not be negative");
        return NULL;
    }
    PyObject *seqs[2] = {NULL, NULL}, *owner = NULL;
    Name *names = NULL;
    Py_ssize_t counts[2] = {0, 0};
    for (int j = 0; j < 2; j++) {
        if (PyUnicode_Check(args[j]) || PyBytes_Check(args[j])) {
            PyErr_SetString(PyExc_TypeError, "configure() takes collections of str, not a str");
            goto error;
        }
        if (!(seqs[j] = PySequence_Fast(args[j], "configure() takes collections of str"))) {
            goto error;
        }
        counts[j] = PySequence_Fast_GET_SIZE(seqs[j]);
        if (counts[j] > UINT16_MAX) {
            PyErr_SetString(PyExc_ValueError, "configure(): too many keys or prefixes");
            goto error;
        }
    }
    Py_ssize_t total = counts[0] + counts[1];
    if (!(owner = PyTuple_New(total))) {
        goto error;
    }
    if (!(names = PyMem_Calloc(total ? (size_t)total : 1, sizeof(Name)))) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < total; i++) {
        int prefix = i >= counts[0];
        PyObject *item = PySequence_Fast_GET_ITEM(seqs[prefix], prefix ? i - counts[0] : i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "configure() takes str keys and prefixes, not %.100s",
                         Py_TYPE(item)->tp_name);
            goto error;
        }
        PyObject *b = PyUnicode_AsUTF8String(item);
        if (!b) {
            goto error;
        }
        PyTuple_SET_ITEM(owner, i, b);
        Name *e = &names[i];
        e->s = PyBytes_AS_STRING(b);
        e->n = PyBytes_GET_SIZE(b);
        if (e->n == 0) {
            PyErr_SetString(PyExc_ValueError, "configure(): an empty key or prefix");
            goto error;
        }
        e->head = key_head((cptr)e->s, e->n);
        e->mask = e->n >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * e->n)) - 1;
    }
    qsort(names, (size_t)counts[0], sizeof(Name), name_order);
    qsort(names + counts[0], (size_t)counts[1], sizeof(Name), name_order);
    PyMem_Free(unread.keys);
    Py_XSETREF(unread.owner, owner);
    unread.keys = names;
    unread.prefixes = names + counts[0];
    index_names(unread.keys, counts[0], unread.key_first);
    index_names(unread.prefixes, counts[1], unread.prefix_first);
    memset(unread.key_lengths, 0, sizeof(unread.key_lengths));
    for (Py_ssize_t i = 0; i < counts[0]; i++) {
        unread.key_lengths[(unsigned char)names[i].s[0]] |= (uint64_t)1 << (names[i].n < 63 ? names[i].n : 63);
    }
    for (int b = 0; b < 256; b++) {
        unread.prefix_min[b] = PY_SSIZE_T_MAX;
    }
    for (Py_ssize_t i = counts[0]; i < total; i++) {
        Py_ssize_t *min = &unread.prefix_min[(unsigned char)names[i].s[0]];
        *min = names[i].n < *min ? names[i].n : *min;
    }
    added_chars = chars;
    if (nargs == 4) {
        Py_XSETREF(key_marks, Py_NewRef(args[3]));
        for (int i = 0; i < SHARED_SLOTS; i++) { /* their marks are looked up again */
            Py_CLEAR(shared_keys[i]);
        }
        for (int i = 0; i < ADD_COUNT; i++) {
            added_key_marks[i] = marks_of(added_keys[i]);
        }
    }
    Py_DECREF(seqs[0]);
    Py_DECREF(seqs[1]);
    Py_RETURN_NONE;
error:
    PyMem_Free(names);
    Py_XDECREF(owner);
    Py_XDECREF(seqs[0]);
    Py_XDECREF(seqs[1]);
    return NULL;
}

/* ------------------------------------------------------------ conversion ---- */

/* AnyValue's oneof while its occurrences are parsed in turn. */
enum { AV_NONE = 0, AV_STR = 1, AV_BOOL = 2, AV_INT = 3, AV_DOUBLE = 4, AV_ARRAY = 5, AV_KVLIST = 6,
       AV_BYTES = 7, AV_STRINDEX = 8 };

typedef struct {
    int which;
    PyObject *obj; /* owned; NULL for AV_NONE and AV_STRINDEX */
} AnyState;

static int feed_any(Dec *d, AnyState *av, cptr p, cptr end);

static inline void
av_set(AnyState *av, int which, PyObject *obj)
{
    Py_XSETREF(av->obj, obj);
    av->which = which;
}

/* The value of an AnyValue state (new reference; None when unset). */
static inline PyObject *
av_take(AnyState *av)
{
    PyObject *o = av->obj;
    av->obj = NULL;
    if (o == NULL) {
        Py_RETURN_NONE;
    }
    return o;
}

static PyObject *
hex_str(cptr s, Py_ssize_t n)
{
    static const char digits[] = "0123456789abcdef";
    PyObject *r = PyUnicode_New(2 * n, 127);
    if (!r) {
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(r);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[2 * i] = (Py_UCS1)digits[s[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)digits[s[i] & 15];
    }
    return r;
}

/* CPython 3.12.0 to 3.12.5 never free an interned str (interning immortalised it): keys a client makes up would
 * stay for good. There the keys are not interned; compiled code then compares them by value, a little slower. */
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030C06F0
#define INTERN_KEYS 0
#else
#define INTERN_KEYS 1
#endif

/* Attribute keys, span names and short string values (operation, model, provider, agent and tool names) repeat
 * from span to span: each distinct one is made into a str once and shared after, from a small direct-mapped
 * table keyed by a hash of its bytes (a colliding one takes the slot over). Keys are interned, so they are the
 * very objects compiled code compares them with; names and values are not (an id interned would stay for good
 * where interning immortalises, as in early Python 3.12 releases). Only short ASCII text is kept (a slot's length
 * in characters is its length in bytes). The GIL guards the tables, as it does every object made here.
 * A str of the UTF-8 in [p, p + n) (new reference); with `marks` (keys), its key marks too. */
static PyObject *
shared_text(PyObject **table, int intern, cptr p, Py_ssize_t n, uint64_t *marks)
{
    PyObject *s;
    if (n > SHARED_MAX_BYTES || n == 0) {
        s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
        if (s != NULL && marks != NULL) {
            *marks = marks_of(s);
        }
        return s;
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    size_t i = h & (SHARED_SLOTS - 1);
    PyObject **slot = &table[i];
    s = *slot;
    if (s != NULL && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_1BYTE_DATA(s), p, (size_t)n) == 0) {
        Py_INCREF(s);
        if (marks != NULL) {
            *marks = shared_key_marks[i];
        }
        return s;
    }
    s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    if (s == NULL) {
        return NULL;
    }
    uint64_t m = marks != NULL ? marks_of(s) : 0;
    if (PyUnicode_IS_ASCII(s)) {
        if (intern) {
            PyUnicode_InternInPlace(&s);
        }
        Py_INCREF(s);
        Py_XSETREF(*slot, s);
        if (marks != NULL) {
            shared_key_marks[i] = m;
        }
    }
    if (marks != NULL) {
        *marks = m;
    }
    return s;
}

typedef struct {
    cptr key;          /* last key occurrence */
    Py_ssize_t keylen;
    PyObject *keyobj;  /* its str (owned), NULL if no key was given or the attribute is left out */
    PyObject *value;   /* owned, converted value (None when unset); NULL when the attribute is left out */
    uint64_t marks;    /* the key marks of keyobj */
} KV;

/* A KeyValue (contents in [p, end)); on success kv holds new references. With may_leave_out (span
 * attributes), an attribute left out (key_unread of its last key) is only checked: nothing is made of its
 * value, nor of its key, and it gets a NULL value. */
static int
parse_kv(Dec *d, KV *kv, cptr p, cptr end, int may_leave_out)
{
    AnyState av = {AV_NONE, NULL};
    cptr begin = p;
    int left_out = may_leave_out && (unread.key_first[256] | unread.prefix_first[256]) ? -1 : 0; /* -1: not known yet */
    int key_left_out = 0; /* while left_out is not known: the last key occurrence is one left out */
    kv->key = NULL;
    kv->keylen = 0;
    kv->keyobj = NULL;
    kv->value = NULL;
    kv->marks = 0;
    if (--d->depth < 0) {
        fail("nesting too deep");
        return -1;
    }
    while (p < end) {
        uint32_t tag;
        p = rd_tag(p, end, &tag);
        if (!p) {
            goto error;
        }
        if (tag == ((1 << 3) | 2)) {
            Py_ssize_t n;
            p = rd_len(p, end, &n);
            if (!p) {
                goto error;
            }
            if (left_out < 0) {
                key_left_out = key_unread(p, n);
            }
            if (left_out > 0 || (left_out < 0 && key_left_out)) { /* no str for a key left out */
                if (!utf8_valid(p, n)) {
                    fail("invalid UTF-8 in a string field");
                    goto error;
                }
                Py_CLEAR(kv->keyobj);
            }
            else {
                PyObject *k = shared_text(shared_keys, INTERN_KEYS, p, n, &kv->marks);
                if (!k) {
                    utf8_error();
                    goto error;
                }
                Py_XSETREF(kv->keyobj, k);
            }
            kv->key = p;
            kv->keylen = n;
            p += n;
        }
        else if (tag == ((2 << 3) | 2)) {
            Py_ssize_t n;
            p = rd_len(p, end, &n);
            if (!p) {
                goto error;
            }
            if (left_out < 0) { /* the key is known when the value ends the KeyValue, as it does in practice */
                left_out = p + n == end ? key_left_out : kv_unread(d->depth, begin, end);
                if (left_out < 0) {
                    goto error;
                }
            }
            if (left_out) { /* checked only: nothing is made of it */
                if (!check_msg(d, M_ANY, p, p + n)) {
                    goto error;
                }
                p += n;
                continue;
            }
            if (--d->depth < 0) {
                fail("nesting too deep");
                goto error;
            }
            if (feed_any(d, &av, p, p + n) < 0) {
                goto error;
            }
            d->depth++;
            p += n;
        }
        else {
            p = skip_field(d, p, end, tag);
            if (!p) {
                goto error;
            }
        }
    }
    d->depth++;
    if (left_out < 0) { /* no value */
        left_out = key_left_out;
    }
    if (left_out) {
        Py_CLEAR(kv->keyobj);
        return 0;
    }
    kv->value = av_take(&av);
    return 0;
error:
    Py_CLEAR(kv->keyobj);
    Py_XDECREF(av.obj);
    return -1;
}

/* Repeated KeyValue field contents into a dict (later keys win); span attributes (may_leave_out) left out
 * are not put in. With `marks`, the key marks of what is put in are OR-ed into it. */
static int
kv_into_dict(Dec *d, PyObject *dict, cptr p, cptr end, int may_leave_out, uint64_t *marks)
{
    KV kv;
    if (parse_kv(d, &kv, p, end, may_leave_out) < 0) {
        return -1;
    }
    if (kv.value == NULL) {
        return 0;
    }
    if (marks != NULL) {
        *marks |= kv.marks;
    }
    PyObject *key = kv.keyobj;
    if (key == NULL) {
        key = PyUnicode_New(0, 0);
        if (!key) {
            Py_DECREF(kv.value);
            return -1;
        }
    }
    int r = PyDict_SetItem(dict, key, kv.value);
    Py_DECREF(key);
    Py_DECREF(kv.value);
    return r;
}

/* One occurrence of an AnyValue (contents in [p, end)), merged into av. Depth is the caller's. */
static int
feed_any(Dec *d, AnyState *av, cptr p, cptr end)
{
    while (p < end) {
        uint32_t tag;
        uint64_t v;
        Py_ssize_t n;
        PyObject *o;
        p = rd_tag(p, end, &tag);
        if (!p) {
            return -1;
        }
        switch (tag) {
        case (1 << 3) | 2: /* string_value */
            p = rd_len(p, end, &n);
            if (!p) {
                return -1;
            }
            o = shared_text(shared_texts, 0, p, n, NULL);
            if (!o) {
                utf8_error();
                return -1;
            }
            av_set(av, AV_STR, o);
            p += n;
            break;
        case (2 << 3) | 0: /* bool_value */
            p = rd_varint(p, end, &v);
            if (!p) {
                return -1;
            }
            o = v ? Py_True : Py_False;
            Py_INCREF(o);
            av_set(av, AV_BOOL, o);
            break;
        case (3 << 3) | 0: /* int_value */
            p = rd_varint(p, end, &v);
            if (!p) {
                return -1;
            }
            o = PyLong_FromLongLong((long long)(int64_t)v);
            if (!o) {
                return -1;
            }
            av_set(av, AV_INT, o);
            break;
        case (4 << 3) | 1: /* double_value */
            if (end - p < 8) {
                fail("truncated fixed64");
                return -1;
            }
            {
                uint64_t bits = le64(p);
                double dv;
                memcpy(&dv, &bits, 8);
                o = PyFloat_FromDouble(dv);
            }
            if (!o) {
                return -1;
            }
            av_set(av, AV_DOUBLE, o);
            p += 8;
            break;
        case (5 << 3) | 2: { /* array_value */
            p = rd_len(p, end, &n);
            if (!p) {
                return -1;
            }
            if (av->which != AV_ARRAY) {
                o = PyList_New(0);
                if (!o) {
                    return -1;
                }
                av_set(av, AV_ARRAY, o);
            }
            if (--d->depth < 0) {
                fail("nesting too deep");
                return -1;
            }
            cptr q = p, qend = p + n;
            while (q < qend) {
                uint32_t t2;
                q = rd_tag(q, qend, &t2);
                if (!q) {
                    return -1;
                }
                if (t2 == ((1 << 3) | 2)) {
                    Py_ssize_t m;
                    q = rd_len(q, qend, &m);
                    if (!q) {
                        return -1;
                    }
                    if (--d->depth < 0) {
                        fail("nesting too deep");
                        return -1;
                    }
                    AnyState item = {AV_NONE, NULL};
                    if (feed_any(d, &item, q, q + m) < 0) {
                        Py_XDECREF(item.obj);
                        return -1;
                    }
                    d->depth++;
                    PyObject *val = av_take(&item);
                    int r = PyList_Append(av->obj, val);
                    Py_DECREF(val);
                    if (r < 0) {
                        return -1;
                    }
                    q += m;
                }
                else {
                    q = skip_field(d, q, qend, t2);
                    if (!q) {
                        return -1;
                    }
                }
            }
            d->depth++;
            p += n;
            break;
        }
        case (6 << 3) | 2: { /* kvlist_value */
            p = rd_len(p, end, &n);
            if (!p) {
                return -1;
            }
            if (av->which != AV_KVLIST) {
                o = PyDict_New();
                if (!o) {
                    return -1;
                }
                av_set(av, AV_KVLIST, o);
            }
            if (--d->depth < 0) {
                fail("nesting too deep");
                return -1;
            }
            cptr q = p, qend = p + n;
            while (q < qend) {
                uint32_t t2;
                q = rd_tag(q, qend, &t2);
                if (!q) {
                    return -1;
                }
                if (t2 == ((1 << 3) | 2)) {
                    Py_ssize_t m;
                    q = rd_len(q, qend, &m);
                    if (!q) {
                        return -1;
                    }
                    if (kv_into_dict(d, av->obj, q, q + m, 0, NULL) < 0) {
                        return -1;
                    }
                    q += m;
                }
                else {
                    q = skip_field(d, q, qend, t2);
                    if (!q) {
                        return -1;
                    }
                }
            }
            d->depth++;
            p += n;
            break;
        }
        case (7 << 3) | 2: /* bytes_value */
            p = rd_len(p, end, &n);
            if (!p) {
                return -1;
            }
            o = hex_str(p, n);
            if (!o) {
                return -1;
            }
            av_set(av, AV_BYTES, o);
            p += n;
            break;
        case (8 << 3) | 0: /* string_value_strindex: a oneof member any_value() maps to None */
            p = rd_varint(p, end, &v);
            if (!p) {
                return -1;
            }
            av_set(av, AV_STRINDEX, NULL);
            break;
        default:
            p = skip_field(d, p, end, tag);
            if (!p) {
                return -1;
            }
        }
    }
    return 0;
}

/* -------------------------------------------------------------- messages ---- */

#define ID_BITS 8 /* each id table has 1 << ID_BITS slots */
#define ID_SLOTS (1 << ID_BITS)

typedef struct {
    PyObject *records;     /* list */
    Py_ssize_t rejected;
    PyObject *record_type;
    int fast_record;       /* record_type is a NamedTuple: fill a tp_alloc'd instance */
    PyObject *trace_ids[ID_SLOTS]; /* see shared_id */
    PyObject *parent_ids[ID_SLOTS];
} Out;

/* Ids repeat within a request: the spans of a trace share its trace id, siblings their parent's span id, and a
 * parent's span id is its children's parent id (children end, so are exported, first). Each trace id and parent
 * id is made into bytes once per request and shared after, from a direct-mapped table keyed by the id's last 8
 * bytes (random in trace and span ids; a colliding id takes the slot over); a span id is looked up among the
 * parent ids only (`keep` 0), so the ids of leaf spans, never seen again, take no slot. The tables live as long as
 * the request's decoding: nothing is kept across requests. Dict lookups by id then meet the very object they
 * stored, its hash cached, and a buffered trace holds each id once. */
static PyObject *
shared_id(PyObject **table, int keep, cptr p, Py_ssize_t n)
{
    uint64_t tail;
    memcpy(&tail, p + n - 8, 8);
    PyObject **slot = &table[(tail * 0x9E3779B97F4A7C15ull) >> (64 - ID_BITS)];
    PyObject *b = *slot;
    if (b != NULL && PyBytes_GET_SIZE(b) == n && memcmp(PyBytes_AS_STRING(b), p, (size_t)n) == 0) {
        return Py_NewRef(b);
    }
    b = PyBytes_FromStringAndSize((const char *)p, n);
    if (b != NULL && keep) {
        Py_XSETREF(*slot, Py_NewRef(b));
    }
    return b;
}

/* Resource attributes a span record carries, by their index in `found` (the last value of each key wins). */
enum { RES_SERVICE, RES_VERSION, RES_ENVIRONMENT, RES_LEGACY_ENVIRONMENT, RES_COUNT };
static const char *const RESOURCE_KEYS[RES_COUNT] = {"service.name", "service.version", "deployment.environment.name",
                                                     "deployment.environment"};

/* Resource (contents in [p, end)): the values of the attributes of RESOURCE_KEYS it has, in `found`. */
static int
parse_resource(Dec *d, cptr p, cptr end, PyObject **found)
{
    if (--d->depth < 0) {
        fail("nesting too deep");
        return -1;
    }
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        p = rd_tag(p, end, &tag);
        if (!p) {
            return -1;
        }
        if (tag == ((1 << 3) | 2)) {
            KV kv;
            p = rd_len(p, end, &n);
            if (!p || parse_kv(d, &kv, p, p + n, 0) < 0) {
                return -1;
            }
            int key = -1;
            for (int i = 0; i < RES_COUNT; i++) {
                if ((size_t)kv.keylen == strlen(RESOURCE_KEYS[i]) && memcmp(kv.key, RESOURCE_KEYS[i], kv.keylen) == 0) {
                    key = i;
                    break;
                }
            }
            if (key >= 0) {
                Py_XSETREF(found[key], kv.value);
            }
            else {
                Py_DECREF(kv.value);
            }
            Py_XDECREF(kv.keyobj);
            p += n;
        }
        else if (tag == ((3 << 3) | 2)) {
            p = rd_len(p, end, &n);
            if (!p || !check_msg(d, M_ENTITYREF, p, p + n)) {
                return -1;
            }
            p += n;
        }
        else {
            p = skip_field(d, p, end, tag);
            if (!p) {
                return -1;
            }
        }
    }
    d->depth++;
    return 0;
}

/* The str of a resource attribute's value, or `otherwise` (a new reference either way; NULL on an error). */
static PyObject *
resource_str(PyObject *value, PyObject *otherwise)
{
    return value ? PyObject_Str(value) : Py_NewRef(otherwise);
}

static void
clear_objects(PyObject **objs, int n)
{
    for (int i = 0; i < n; i++) {
        Py_CLEAR(objs[i]);
    }
}

/* The index in ADDED_KEYS of an exception event attribute added to the span (raw key bytes), or -1. */
static int
exception_key(cptr k, Py_ssize_t n)
{
    if (n < 14 || memcmp(k, "exception.", 10) != 0) {
        return -1;
    }
    for (int i = 0; i < EXC_COUNT; i++) {
        if ((Py_ssize_t)strlen(ADDED_KEYS[i]) == n && memcmp(k, ADDED_KEYS[i], (size_t)n) == 0) {
            return i;
        }
    }
    return -1;
}

/* A Span.Event (contents in [p, end)), checked as check_msg(M_EVENT) checks it. When it is named "exception",
 * exc[] gets the values of its last exception.type / .message / .escaped attributes (new references, NULL for
 * those it lacks) in place of an earlier exception event's. Its other attributes are only checked. */
static int
parse_event(Dec *d, PyObject **exc, cptr p, cptr end)
{
    PyObject *found[EXC_COUNT] = {NULL};
    cptr name = NULL;
    Py_ssize_t namelen = 0;
    if (--d->depth < 0) {
        fail("nesting too deep");
        return -1;
    }
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            goto error;
        }
        if (tag == ((2 << 3) | 2)) { /* name */
            if (!(p = rd_str(p, end, &name, &namelen))) {
                goto error;
            }
        }
        else if (tag == ((3 << 3) | 2)) { /* attributes */
            cptr key;
            Py_ssize_t keylen;
            if (!(p = rd_len(p, end, &n)) || kv_last_key(d->depth - 1, p, p + n, &key, &keylen) < 0) {
                goto error;
            }
            int i = key ? exception_key(key, keylen) : -1;
            if (i >= 0) {
                KV kv;
                if (parse_kv(d, &kv, p, p + n, 0) < 0) {
                    goto error;
                }
                Py_XDECREF(kv.keyobj);
                Py_XSETREF(found[i], kv.value);
            }
            else if (!check_msg(d, M_KV, p, p + n)) {
                goto error;
            }
            p += n;
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            goto error;
        }
    }
    d->depth++;
    if (namelen == 9 && memcmp(name, "exception", 9) == 0) {
        clear_objects(exc, EXC_COUNT);
        memcpy(exc, found, sizeof(found));
        return 0;
    }
    clear_objects(found, EXC_COUNT);
    return 0;
error:
    clear_objects(found, EXC_COUNT);
    return -1;
}

/* The first `chars` characters of valid UTF-8 (new reference). */
static PyObject *
utf8_head(cptr s, Py_ssize_t n, Py_ssize_t chars)
{
    if (n > chars) { /* more bytes than characters kept: find where the character after the last kept starts */
        Py_ssize_t i, count = 0;
        for (i = 0; i < n; i++) {
            if ((s[i] & 0xC0) != 0x80 && count++ == chars) {
                break;
            }
        }
        n = i;
    }
    return PyUnicode_DecodeUTF8((const char *)s, n, NULL);
}

/* Add the values of the last exception event and the status message to a span's attributes (each under a
 * name it has no attribute of), as decode_python does. exc[] is borrowed; status may be NULL. */
static int
add_failure(PyObject *attrs, PyObject **exc, cptr status, Py_ssize_t status_len, uint64_t *marks)
{
    for (int i = 0; i < ADD_COUNT; i++) {
        PyObject *v;
        if (i == ADD_STATUS) {
            if (status == NULL || status_len == 0) {
                continue;
            }
            v = utf8_head(status, status_len, added_chars);
        }
        else if (exc[i] == NULL) {
            continue;
        }
        else if (PyUnicode_CheckExact(exc[i])) {
            v = PyUnicode_GET_LENGTH(exc[i]) > added_chars ? PyUnicode_Substring(exc[i], 0, added_chars)
                                                           : Py_NewRef(exc[i]);
        }
        else if (PyBool_Check(exc[i])) {
            v = Py_NewRef(exc[i]);
        }
        else {
            continue;
        }
        if (!v) {
            return -1;
        }
        PyObject *r = PyDict_SetDefault(attrs, added_keys[i], v);
        Py_DECREF(v);
        if (!r) {
            return -1;
        }
        *marks |= added_key_marks[i];
    }
    return 0;
}

static PyObject *
make_record(Out *out, PyObject **items)
{
    if (out->fast_record) {
        PyTypeObject *tp = (PyTypeObject *)out->record_type;
        PyObject *r = tp->tp_alloc(tp, RECORD_FIELDS);
        if (!r) {
            return NULL;
        }
        for (int i = 0; i < RECORD_FIELDS; i++) {
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(r, i, items[i]);
        }
        return r;
    }
    return PyObject_Vectorcall(out->record_type, items, RECORD_FIELDS, NULL);
}

/* A Span (contents in [p, end)). */
static int
parse_span(Dec *d, Out *out, const Resource *resource, cptr p, cptr end)
{
    cptr trace_id = NULL, span_id = NULL, parent = NULL;
    Py_ssize_t trace_len = 0, span_len = 0, parent_len = 0;
    uint64_t start = 0, stop = 0;
    int32_t code = 0;
    cptr status_msg = NULL; /* the last Status.message */
    Py_ssize_t status_msg_len = 0;
    PyObject *exc[EXC_COUNT] = {NULL}; /* of the last exception event */
    PyObject *name = NULL;
    uint64_t marks = 0; /* of the attribute keys */
    PyObject *attrs = PyDict_New();
    if (!attrs) {
        return -1;
    }
    if (--d->depth < 0) {
        fail("nesting too deep");
        goto error;
    }
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        p = rd_tag(p, end, &tag);
        if (!p) {
            goto error;
        }
        switch (tag) {
        case (1 << 3) | 2:
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            trace_id = p;
            trace_len = n;
            p += n;
            break;
        case (2 << 3) | 2:
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            span_id = p;
            span_len = n;
            p += n;
            break;
        case (3 << 3) | 2: { /* trace_state */
            cptr s;
            if (!(p = rd_str(p, end, &s, &n))) {
                goto error;
            }
            break;
        }
        case (4 << 3) | 2:
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            parent = p;
            parent_len = n;
            p += n;
            break;
        case (5 << 3) | 2: {
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            PyObject *s = shared_text(shared_texts, 0, p, n, NULL);
            if (!s) {
                utf8_error();
                goto error;
            }
            Py_XSETREF(name, s);
            p += n;
            break;
        }
        case (7 << 3) | 1:
            if (end - p < 8) {
                fail("truncated fixed64");
                goto error;
            }
            start = le64(p);
            p += 8;
            break;
        case (8 << 3) | 1:
            if (end - p < 8) {
                fail("truncated fixed64");
                goto error;
            }
            stop = le64(p);
            p += 8;
            break;
        case (9 << 3) | 2:
            if (!(p = rd_len(p, end, &n)) || kv_into_dict(d, attrs, p, p + n, 1, &marks) < 0) {
                goto error;
            }
            p += n;
            break;
        case (11 << 3) | 2:
            if (!(p = rd_len(p, end, &n)) || parse_event(d, exc, p, p + n) < 0) {
                goto error;
            }
            p += n;
            break;
        case (13 << 3) | 2:
            if (!(p = rd_len(p, end, &n)) || !check_msg(d, M_LINK, p, p + n)) {
                goto error;
            }
            p += n;
            break;
        case (15 << 3) | 2: { /* status: occurrences merge, the code's last value wins */
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            if (--d->depth < 0) {
                fail("nesting too deep");
                goto error;
            }
            cptr q = p, qend = p + n;
            while (q < qend) {
                uint32_t t2;
                if (!(q = rd_tag(q, qend, &t2))) {
                    goto error;
                }
                if (t2 == ((3 << 3) | 0)) {
                    uint64_t v;
                    if (!(q = rd_varint(q, qend, &v))) {
                        goto error;
                    }
                    code = (int32_t)(uint32_t)v;
                }
                else if (t2 == ((2 << 3) | 2)) {
                    if (!(q = rd_str(q, qend, &status_msg, &status_msg_len))) {
                        goto error;
                    }
                }
                else if (!(q = skip_field(d, q, qend, t2))) {
                    goto error;
                }
            }
            d->depth++;
            p += n;
            break;
        }
        default:
            if (!(p = skip_field(d, p, end, tag))) {
                goto error;
            }
        }
    }
    d->depth++;

    int valid = trace_len == 16 && span_len == 8 && (parent_len == 0 || parent_len == 8);
    if (valid) {
        valid = 0;
        for (int i = 0; i < 16; i++) {
            if (trace_id[i]) {
                valid = 1;
                break;
            }
        }
    }
    if (!valid) {
        out->rejected++;
        Py_XDECREF(name);
        Py_DECREF(attrs);
        clear_objects(exc, EXC_COUNT);
        return 0;
    }
    if (add_failure(attrs, exc, status_msg, status_msg_len, &marks) < 0) {
        goto error;
    }
    clear_objects(exc, EXC_COUNT);
    if (!name) {
        name = PyUnicode_New(0, 0);
        if (!name) {
            goto error;
        }
    }
    PyObject *items[RECORD_FIELDS] = {resource->service, NULL, NULL, NULL, name, NULL, NULL, NULL, attrs, NULL,
                                      resource->version, resource->environment};
    items[1] = shared_id(out->trace_ids, 1, trace_id, 16);
    items[2] = shared_id(out->parent_ids, 0, span_id, 8);
    items[3] = parent_len ? shared_id(out->parent_ids, 1, parent, parent_len) : PyBytes_FromStringAndSize(NULL, 0);
    items[5] = PyLong_FromUnsignedLongLong(start);
    items[6] = PyLong_FromUnsignedLongLong(stop);
    items[7] = PyLong_FromLong(code);
    items[9] = PyLong_FromUnsignedLongLong(marks);
    PyObject *rec = NULL;
    if (items[1] && items[2] && items[3] && items[5] && items[6] && items[7] && items[9]) {
        rec = make_record(out, items);
    }
    for (int i = 1; i < 10; i++) { /* the ones made here */
        if (i != 4 && i != 8) {
            Py_XDECREF(items[i]);
        }
    }
    Py_DECREF(name);
    Py_DECREF(attrs);
    if (!rec) {
        return -1;
    }
    int r = PyList_Append(out->records, rec);
    Py_DECREF(rec);
    return r;

error:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    clear_objects(exc, EXC_COUNT);
    return -1;
}

/* ScopeSpans (contents in [p, end)). */
static int
parse_scope_spans(Dec *d, Out *out, const Resource *resource, cptr p, cptr end)
{
    if (--d->depth < 0) {
        fail("nesting too deep");
        return -1;
    }
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            return -1;
        }
        if (tag == ((2 << 3) | 2)) {
            if (!(p = rd_len(p, end, &n)) || parse_span(d, out, resource, p, p + n) < 0) {
                return -1;
            }
            p += n;
        }
        else if (tag == ((1 << 3) | 2)) {
            if (!(p = rd_len(p, end, &n)) || !check_msg(d, M_SCOPE, p, p + n)) {
                return -1;
            }
            p += n;
        }
        else if (tag == ((3 << 3) | 2)) { /* schema_url */
            cptr s;
            if (!(p = rd_str(p, end, &s, &n))) {
                return -1;
            }
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            return -1;
        }
    }
    d->depth++;
    return 0;
}

/* ResourceSpans (contents in [p, end)): the resource first (it may follow the spans on the wire). */
static void
clear_resource(Resource *resource)
{
    Py_CLEAR(resource->service);
    Py_CLEAR(resource->version);
    Py_CLEAR(resource->environment);
}

static int
parse_resource_spans(Dec *d, Out *out, cptr p, cptr end)
{
    PyObject *found[RES_COUNT] = {NULL};
    Resource resource = {NULL, NULL, NULL};
    cptr begin = p;
    if (--d->depth < 0) {
        fail("nesting too deep");
        return -1;
    }
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            goto error;
        }
        if (tag == ((1 << 3) | 2)) {
            if (!(p = rd_len(p, end, &n)) || parse_resource(d, p, p + n, found) < 0) {
                goto error;
            }
            p += n;
        }
        else if (tag == ((2 << 3) | 2)) { /* scope_spans: second pass */
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            p += n;
        }
        else if (tag == ((3 << 3) | 2)) { /* schema_url */
            cptr s;
            if (!(p = rd_str(p, end, &s, &n))) {
                goto error;
            }
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            goto error;
        }
    }
    resource.service = resource_str(found[RES_SERVICE], unknown_service);
    resource.version = resource_str(found[RES_VERSION], empty_string);
    resource.environment = resource_str(found[RES_ENVIRONMENT], empty_string);
    if (resource.environment && PyUnicode_GET_LENGTH(resource.environment) == 0) {
        Py_SETREF(resource.environment, resource_str(found[RES_LEGACY_ENVIRONMENT], empty_string));
    }
    clear_objects(found, RES_COUNT);
    if (!resource.service || !resource.version || !resource.environment) {
        goto error;
    }
    /* Second pass: every tag and length was checked by the first. */
    for (p = begin; p < end;) {
        uint32_t tag = 0;
        Py_ssize_t n = 0;
        if (!(p = rd_tag(p, end, &tag))) {
            goto error;
        }
        if ((tag & 7) == 2) {
            if (!(p = rd_len(p, end, &n))) {
                goto error;
            }
            if (tag == ((2 << 3) | 2) && parse_scope_spans(d, out, &resource, p, p + n) < 0) {
                goto error;
            }
            p += n;
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            goto error;
        }
    }
    d->depth++;
    clear_resource(&resource);
    return 0;
error:
    clear_objects(found, RES_COUNT);
    clear_resource(&resource);
    return -1;
}

static int
parse_request(Dec *d, Out *out, cptr p, cptr end)
{
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            return -1;
        }
        if (tag == ((1 << 3) | 2)) {
            if (!(p = rd_len(p, end, &n)) || parse_resource_spans(d, out, p, p + n) < 0) {
                return -1;
            }
            p += n;
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ span count ---- */

/* What count_fields counts inside each occurrence of its field; -1 when the framing is broken. */
typedef Py_ssize_t (*Counter)(Dec *d, cptr p, cptr end);

/* The occurrences of length-delimited field `fn` in [p, end), or what `inner` counts inside them (when not
 * NULL); -1 when the framing is broken. Other fields are skipped as the parse_* functions skip them. */
static Py_ssize_t
count_fields(Dec *d, cptr p, cptr end, uint32_t fn, Counter inner)
{
    Py_ssize_t count = 0;
    while (p < end) {
        uint32_t tag;
        Py_ssize_t n;
        if (!(p = rd_tag(p, end, &tag))) {
            return -1;
        }
        if (tag == ((fn << 3) | 2)) {
            if (!(p = rd_len(p, end, &n))) {
                return -1;
            }
            Py_ssize_t c = inner ? inner(d, p, p + n) : 1;
            if (c < 0) {
                return -1;
            }
            count += c;
            p += n;
        }
        else if (!(p = skip_field(d, p, end, tag))) {
            return -1;
        }
    }
    return count;
}

static Py_ssize_t
count_scope_spans(Dec *d, cptr p, cptr end)
{
    return count_fields(d, p, end, 2, NULL); /* ScopeSpans.spans */
}

static Py_ssize_t
count_resource_spans(Dec *d, cptr p, cptr end)
{
    return count_fields(d, p, end, 2, count_scope_spans); /* ResourceSpans.scope_spans */
}

static PyObject *
count_spans(PyObject *Py_UNUSED(module), PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Dec d = {MAX_DEPTH};
    cptr p = (cptr)view.buf;
    Py_ssize_t count = count_fields(&d, p, p + view.len, 1, count_resource_spans); /* resource_spans */
    PyBuffer_Release(&view);
    if (count < 0) {
        return fail("malformed request");
    }
    return PyLong_FromSsize_t(count);
}

/* ---------------------------------------------------------------- module ---- */

static int
is_record_namedtuple(PyObject *t)
{
    if (!PyType_Check(t) || !PyType_IsSubtype((PyTypeObject *)t, &PyTuple_Type)) {
        return 0;
    }
    PyObject *fields = PyObject_GetAttrString(t, "_fields");
    if (!fields) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) == RECORD_FIELDS;
    Py_DECREF(fields);
    return ok;
}

static PyObject *
decode_request(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode_request(data, record_type) takes 2 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Out out = {PyList_New(0), 0, args[1], 0, {NULL}, {NULL}};
    PyObject *result = NULL;
    if (out.records) {
        out.fast_record = is_record_namedtuple(args[1]);
        Dec d = {MAX_DEPTH};
        cptr p = (cptr)view.buf;
        if (parse_request(&d, &out, p, p + view.len) == 0) {
            result = Py_BuildValue("(On)", out.records, out.rejected);
        }
        else {
            fail("malformed request");
        }
        Py_DECREF(out.records);
    }
    for (int i = 0; i < ID_SLOTS; i++) {
        Py_XDECREF(out.trace_ids[i]);
        Py_XDECREF(out.parent_ids[i]);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_request", (PyCFunction)(void (*)(void))decode_request, METH_FASTCALL,
     "decode_request(data, record_type) -> (records, rejected): spans of a serialized "
     "ExportTraceServiceRequest; ValueError when it is malformed."},
    {"count_spans", (PyCFunction)count_spans, METH_O,
     "count_spans(data) -> int: the spans of a serialized ExportTraceServiceRequest, valid or not, read from the "
     "framing of the request, its resource spans and scope spans alone (nothing inside a span is read); "
     "ValueError when that framing is broken."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(keys, prefixes, chars[, marks]): span attributes to leave out of the attribute dicts from now on, "
     "by exact key and by key prefix (collections of str), how many characters of a string added from the "
     "status or an exception event are kept, and the key marks (dict of str to int) whose OR over a span's "
     "attribute keys is its record's last field."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_otlpdecode", "OTLP trace requests decoded from protobuf wire format.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__otlpdecode(void)
{
    if (!unknown_service) {
        unknown_service = PyUnicode_FromString("unknown_service");
        if (!unknown_service) {
            return NULL;
        }
    }
    if (!empty_string && !(empty_string = PyUnicode_New(0, 0))) {
        return NULL;
    }
    for (int i = 0; i < ADD_COUNT; i++) {
        if (!added_keys[i] && !(added_keys[i] = PyUnicode_InternFromString(ADDED_KEYS[i]))) {
            return NULL;
        }
    }
    return PyModule_Create(&module);
}
