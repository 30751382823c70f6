#include "drasync/yaml.h"

#include "drasync/buf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/*
 * Reading: libyaml's event parser drives a recursive builder of jansson values
 * (depth bounded by DS_YAML_MAX_DEPTH, so the C stack is bounded too). Plain
 * scalars are resolved with the rules of the go-yaml v2 fork inside
 * sigs.k8s.io/yaml, which is what kubectl uses; see resolve_plain().
 */

/* ------------------------------------------------------------------ */
/* Locations                                                           */

struct loc_entry {
	size_t doc;
	size_t off, len; /* the JSON pointer, in locs->arena */
	ds_yaml_loc loc;
};

struct loc_slot {
	size_t idx; /* entry index + 1, 0 = empty */
	uint64_t hash;
};

struct ds_yaml_locs {
	char *file;
	struct loc_entry *v;
	size_t n, cap;
	char *arena;
	size_t alen, acap;
	struct loc_slot *slots; /* open-addressing index */
	size_t nslots;		/* power of two */
};

void ds_yaml_locs_free(ds_yaml_locs *locs)
{
	if (!locs)
		return;
	free(locs->file);
	free(locs->v);
	free(locs->arena);
	free(locs->slots);
	free(locs);
}

const char *ds_yaml_locs_file(const ds_yaml_locs *locs)
{
	return locs ? locs->file : NULL;
}

static uint64_t hash_key(size_t doc, const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)doc; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	/* FNV's low bits mix poorly and the table uses them: finish with murmur3's fmix64. */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Index the entries; a later entry for the same (doc, pointer) wins. */
static int locs_index(ds_yaml_locs *locs)
{
	size_t n = 16;

	while (n < locs->n * 2)
		n *= 2;
	free(locs->slots);
	locs->slots = calloc(n, sizeof(*locs->slots));
	if (!locs->slots)
		return -ENOMEM;
	locs->nslots = n;
	for (size_t i = 0; i < locs->n; i++) {
		const struct loc_entry *e = &locs->v[i];
		uint64_t hv = hash_key(e->doc, locs->arena + e->off, e->len);
		size_t h = (size_t)hv & (n - 1);

		/* The full hash sits in the slot, so probing rarely touches the entries. */
		for (;; h = (h + 1) & (n - 1)) {
			struct loc_slot *sl = &locs->slots[h];
			const struct loc_entry *o;

			if (!sl->idx) {
				sl->idx = i + 1;
				sl->hash = hv;
				break;
			}
			if (sl->hash != hv)
				continue;
			o = &locs->v[sl->idx - 1];
			if (o->doc == e->doc && o->len == e->len &&
			    memcmp(locs->arena + o->off, locs->arena + e->off, e->len) == 0) {
				sl->idx = i + 1;
				break;
			}
		}
	}
	return 0;
}

int ds_yaml_locs_find(const ds_yaml_locs *locs, size_t doc, const char *ptr, ds_yaml_loc *out)
{
	size_t len, h;
	uint64_t hv;

	if (!locs || !ptr || !locs->nslots)
		return -ENOENT;
	len = strlen(ptr);
	hv = hash_key(doc, ptr, len);
	h = (size_t)hv & (locs->nslots - 1);
	for (;; h = (h + 1) & (locs->nslots - 1)) {
		const struct loc_slot *sl = &locs->slots[h];
		const struct loc_entry *e;

		if (!sl->idx)
			return -ENOENT;
		if (sl->hash != hv)
			continue;
		e = &locs->v[sl->idx - 1];
		if (e->doc == doc && e->len == len && memcmp(locs->arena + e->off, ptr, len) == 0) {
			if (out)
				*out = e->loc;
			return 0;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Scalar resolution (go-yaml v2 rules)                               */

enum res_kind { R_STR, R_NULL, R_BOOL, R_INT, R_REAL, R_NONFINITE };

struct res {
	enum res_kind kind;
	bool b;
	bool big; /* R_REAL from an integer beyond int64 */
	long long i;
	double d;
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool eq(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);

	return n == len && memcmp(s, lit, n) == 0;
}

static bool any_of(const char *s, size_t len, const char *const *lits)
{
	for (; *lits; lits++)
		if (eq(s, len, *lits))
			return true;
	return false;
}

static const char *const true_words[] = {"y",	 "Y",	 "yes", "Yes", "YES", "true",
					 "True", "TRUE", "on",	"On",  "ON",  NULL};
static const char *const false_words[] = {"n",	   "N",	    "no",  "No",  "NO",	 "false",
					  "False", "FALSE", "off", "Off", "OFF", NULL};
static const char *const null_words[] = {"~", "null", "Null", "NULL", NULL};
static const char *const nan_words[] = {".nan", ".NaN", ".NAN", NULL};
static const char *const inf_words[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
static const char *const ninf_words[] = {"-.inf", "-.Inf", "-.INF", NULL};

/* The map lookup of go-yaml's resolve(): true when s is one of its words. */
static bool resolve_word(const char *s, size_t len, struct res *r)
{
	if (any_of(s, len, true_words) || any_of(s, len, false_words)) {
		r->kind = R_BOOL;
		r->b = any_of(s, len, true_words);
		return true;
	}
	if (any_of(s, len, null_words)) {
		r->kind = R_NULL;
		return true;
	}
	if (any_of(s, len, nan_words)) {
		r->kind = R_NONFINITE;
		r->d = NAN;
		return true;
	}
	if (any_of(s, len, inf_words)) {
		r->kind = R_NONFINITE;
		r->d = INFINITY;
		return true;
	}
	if (any_of(s, len, ninf_words)) {
		r->kind = R_NONFINITE;
		r->d = -INFINITY;
		return true;
	}
	return false;
}

enum num_err { N_OK, N_SYNTAX, N_RANGE };

static int digit_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	return 99;
}

/*
 * Go's strconv.ParseUint(s, 0, 64) on a string without '_': prefixes 0x, 0o,
 * 0b, a leading 0 for octal, no sign. *approx receives the value as a double
 * even when it overflows (for N_RANGE).
 */
static enum num_err go_parse_uint(const char *s, size_t len, unsigned long long *out,
				  double *approx)
{
	unsigned base = 10;
	unsigned long long v = 0;
	double a = 0;
	bool range = false;

	if (len == 0)
		return N_SYNTAX;
	if (s[0] == '0') {
		if (len >= 3 && (s[1] == 'b' || s[1] == 'B'))
			base = 2, s += 2, len -= 2;
		else if (len >= 3 && (s[1] == 'o' || s[1] == 'O'))
			base = 8, s += 2, len -= 2;
		else if (len >= 3 && (s[1] == 'x' || s[1] == 'X'))
			base = 16, s += 2, len -= 2;
		else
			base = 8, s += 1, len -= 1;
	}
	for (size_t i = 0; i < len; i++) {
		int d = digit_val(s[i]);

		if (d >= (int)base)
			return N_SYNTAX;
		a = a * base + d;
		if (v > (ULLONG_MAX - (unsigned)d) / base)
			range = true;
		else
			v = v * base + (unsigned)d;
	}
	if (approx)
		*approx = a;
	if (range)
		return N_RANGE;
	*out = v;
	return N_OK;
}

/* Go's strconv.ParseInt(s, 0, 64) on a string without '_'. */
static enum num_err go_parse_int(const char *s, size_t len, long long *out)
{
	bool neg = false;
	unsigned long long u;
	enum num_err e;

	if (len && (s[0] == '+' || s[0] == '-')) {
		neg = s[0] == '-';
		s++, len--;
	}
	e = go_parse_uint(s, len, &u, NULL);
	if (e != N_OK)
		return e;
	if (!neg && u > (unsigned long long)LLONG_MAX)
		return N_RANGE;
	if (neg && u > (unsigned long long)LLONG_MAX + 1ull)
		return N_RANGE;
	if (neg)
		*out = u == (unsigned long long)LLONG_MAX + 1ull ? LLONG_MIN : -(long long)u;
	else
		*out = (long long)u;
	return N_OK;
}

/* ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ (go-yaml's yamlStyleFloat) */
static bool yaml_style_float(const char *s, size_t len)
{
	size_t i = 0, n;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		i++;
	if (i < len && s[i] == '.') {
		i++;
		for (n = 0; i < len && is_digit(s[i]); i++)
			n++;
		if (!n)
			return false;
	} else {
		for (n = 0; i < len && is_digit(s[i]); i++)
			n++;
		if (!n)
			return false;
		if (i < len && s[i] == '.')
			for (i++; i < len && is_digit(s[i]); i++)
				;
	}
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		for (n = 0; i < len && is_digit(s[i]); i++)
			n++;
		if (!n)
			return false;
	}
	return i == len;
}

/* strtod on a bounded, '_'-free copy; false when out of range (as Go's ParseFloat fails). */
static bool parse_double(const char *s, size_t len, double *out)
{
	char buf[128];
	char *end;
	double d;

	if (len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	d = strtod(buf, &end);
	if (end != buf + len)
		return false;
	if (errno == ERANGE && isinf(d))
		return false;
	*out = d;
	return true;
}

/* Copy s without '_' into buf (size cap); false when it does not fit. */
static bool strip_underscores(const char *s, size_t len, char *buf, size_t cap, size_t *outlen)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (s[i] == '_')
			continue;
		if (n + 1 >= cap)
			return false;
		buf[n++] = s[i];
	}
	buf[n] = '\0';
	*outlen = n;
	return true;
}

/* go-yaml's parseTimestamp quick check plus the date shape; such values stay strings. */
static bool looks_like_timestamp(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len && is_digit(s[i]))
		i++;
	return i == 4 && i < len && s[i] == '-';
}

/* Resolve digits/sign-led plain scalars: go-yaml's 'D' and 'S' cases. */
static void resolve_number(const char *s, size_t len, struct res *r)
{
	char plain[128];
	size_t plen;
	long long i;
	unsigned long long u;
	double d;
	enum num_err ue;

	r->kind = R_STR;
	if (looks_like_timestamp(s, len))
		return; /* a timestamp when Go can parse it, which kubectl keeps as a string */
	if (!strip_underscores(s, len, plain, sizeof(plain), &plen)) {
		/* Too long for any int64; Go would try float / big.Int: only plain digit runs
		 * matter. */
		if (len < 4096 && yaml_style_float(s, len)) {
			char *copy = strndup(s, len);

			if (copy) {
				errno = 0;
				d = strtod(copy, NULL);
				if (!(errno == ERANGE && isinf(d))) {
					r->kind = R_REAL;
					r->d = d;
				}
				free(copy);
			}
		}
		return;
	}
	if (go_parse_int(plain, plen, &i) == N_OK) {
		r->kind = R_INT;
		r->i = i;
		return;
	}
	ue = go_parse_uint(plain, plen, &u, &d);
	if (ue == N_OK) {
		/* Beyond int64: kube's JSON decoding turns such numbers into float64. */
		r->kind = R_REAL;
		r->big = true;
		r->d = (double)u;
		return;
	}
	if (yaml_style_float(plain, plen) && parse_double(plain, plen, &d)) {
		r->kind = R_REAL;
		r->d = d;
		return;
	}
	if (ue == N_RANGE) { /* a big.Int in go-yaml; a float64 once kube decodes it */
		r->kind = R_REAL;
		r->big = true;
		r->d = d;
	}
}

/* '.'-led plain scalars: Go's ParseFloat (underscores only between digits). */
static void resolve_dot(const char *s, size_t len, struct res *r)
{
	char plain[128] = "";
	size_t n = 0;
	double d;

	r->kind = R_STR;
	if (len >= sizeof(plain))
		return;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '_') {
			if (i == 0 || i + 1 >= len || !is_digit(s[i - 1]) || !is_digit(s[i + 1]))
				return;
			continue;
		}
		plain[n++] = s[i];
	}
	if (yaml_style_float(plain, n) && parse_double(plain, n, &d)) {
		r->kind = R_REAL;
		r->d = d;
	}
}

/* Type a plain (untagged, unquoted) scalar as go-yaml v2 does. */
static void resolve_plain(const char *s, size_t len, struct res *r)
{
	char c;

	r->kind = R_STR;
	r->big = false;
	if (len == 0) {
		r->kind = R_NULL;
		return;
	}
	c = s[0];
	if (c == '+' || c == '-' || is_digit(c)) {
		if (resolve_word(s, len, r))
			return;
		resolve_number(s, len, r);
	} else if (c == '.') {
		if (resolve_word(s, len, r))
			return;
		resolve_dot(s, len, r);
	} else if (strchr("yYnNtTfFoO~", c)) {
		resolve_word(s, len, r);
	}
}

/* ------------------------------------------------------------------ */
/* Parser                                                              */

struct anchor {
	char *name;
	json_t *value; /* NULL while the anchored node is being parsed */
	size_t nodes;  /* nodes in value, the cost of one alias */
	int height;
	size_t loc_first, loc_end; /* its location entries */
	size_t prefix_len;	   /* length of its JSON pointer */
};

struct ps {
	yaml_parser_t p;
	const char *buf;
	size_t len;
	const char *file;
	ds_err *err;
	ds_yaml_locs *locs; /* NULL: record nothing */
	size_t doc;
	struct anchor *anchors;
	size_t nanchors, capanchors;
	size_t nodes;	    /* nodes read from the text */
	size_t alias_nodes; /* nodes added by aliases */
	char *ptr;	    /* current JSON pointer (with locations) */
	size_t ptrlen, ptrcap;
};

#define DS_YAML_MIN_ALIAS_BUDGET 100000u

static int fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m)
		ds_err_setloc(ps->err, ps->file, (int)m->line + 1, (int)m->column + 1, "%s", msg);
	else
		ds_err_setloc(ps->err, ps->file, 0, 0, "%s", msg);
	return rc;
}

/* Line and column (1-based) of a byte offset, for reader errors libyaml reports by offset. */
static void offset_to_mark(const struct ps *ps, size_t off, yaml_mark_t *m)
{
	size_t line = 0, col = 0;

	if (off > ps->len)
		off = ps->len;
	for (size_t i = 0; i < off; i++) {
		if (ps->buf[i] == '\n')
			line++, col = 0;
		else if (((unsigned char)ps->buf[i] & 0xC0) != 0x80)
			col++;
	}
	m->index = off;
	m->line = line;
	m->column = col;
}

static int parser_error(struct ps *ps)
{
	yaml_parser_t *p = &ps->p;
	const char *problem = p->problem ? p->problem : "invalid YAML";
	yaml_mark_t m = p->problem_mark;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		ds_err_set(ps->err, "out of memory while reading YAML");
		return -ENOMEM;
	case YAML_READER_ERROR:
		offset_to_mark(ps, p->problem_offset, &m);
		if (p->problem_value != -1)
			return fail(ps, &m, -EBADMSG, "%s (#%X)", problem,
				    (unsigned)p->problem_value);
		return fail(ps, &m, -EBADMSG, "%s", problem);
	default:
		if (m.index < ps->len && ps->buf[m.index] == '\t' &&
		    !strcmp(problem, "found character that cannot start any token"))
			return fail(ps, &m, -EBADMSG,
				    "found a tab character that cannot start any token (YAML is "
				    "indented with spaces, not tabs)");
		if (p->context)
			return fail(ps, &m, -EBADMSG, "%s %s", p->context, problem);
		return fail(ps, &m, -EBADMSG, "%s", problem);
	}
}

static int next(struct ps *ps, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&ps->p, ev))
		return parser_error(ps);
	return 0;
}

/* JSON pointer maintenance (only with locations). */
static int ptr_push(struct ps *ps, const char *seg, size_t len)
{
	size_t need = ps->ptrlen + 2 + len * 2;
	int rc = ds_grow((void **)&ps->ptr, &ps->ptrcap, need, 1);

	if (rc)
		return rc;
	ps->ptr[ps->ptrlen++] = '/';
	for (size_t i = 0; i < len; i++) {
		if (seg[i] == '~') {
			ps->ptr[ps->ptrlen++] = '~';
			ps->ptr[ps->ptrlen++] = '0';
		} else if (seg[i] == '/') {
			ps->ptr[ps->ptrlen++] = '~';
			ps->ptr[ps->ptrlen++] = '1';
		} else {
			ps->ptr[ps->ptrlen++] = seg[i];
		}
	}
	return 0;
}

static int ptr_push_index(struct ps *ps, size_t i)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%zu", i);

	return ptr_push(ps, b, (size_t)n);
}

static int loc_add(ds_yaml_locs *locs, size_t doc, const char *p1, size_t l1, const char *p2,
		   size_t l2, const ds_yaml_loc *loc)
{
	struct loc_entry *e;
	int rc;

	rc = ds_grow((void **)&locs->v, &locs->cap, locs->n + 1, sizeof(*locs->v));
	if (!rc)
		rc = ds_grow((void **)&locs->arena, &locs->acap, locs->alen + l1 + l2 + 1, 1);
	if (rc)
		return rc;
	e = &locs->v[locs->n++];
	e->doc = doc;
	e->off = locs->alen;
	e->len = l1 + l2;
	e->loc = *loc;
	if (l1)
		memcpy(locs->arena + locs->alen, p1, l1);
	if (l2)
		memcpy(locs->arena + locs->alen + l1, p2, l2);
	locs->alen += l1 + l2;
	return 0;
}

static int record(struct ps *ps, const yaml_mark_t *m, const yaml_mark_t *key)
{
	ds_yaml_loc loc = {(int)m->line + 1, (int)m->column + 1, 0, 0};

	if (!ps->locs)
		return 0;
	if (key) {
		loc.key_line = (int)key->line + 1;
		loc.key_col = (int)key->column + 1;
	}
	return loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, NULL, 0, &loc);
}

static struct anchor *anchor_find(struct ps *ps, const char *name)
{
	/* The latest definition of a name wins (YAML allows redefinition). */
	for (size_t i = ps->nanchors; i > 0; i--)
		if (strcmp(ps->anchors[i - 1].name, name) == 0)
			return &ps->anchors[i - 1];
	return NULL;
}

static void anchors_clear(struct ps *ps)
{
	for (size_t i = 0; i < ps->nanchors; i++) {
		free(ps->anchors[i].name);
		json_decref(ps->anchors[i].value);
	}
	ps->nanchors = 0;
}

/* An anchor on a mapping key: a complete scalar (steals value). */
static int anchor_add(struct ps *ps, const char *name, json_t *value)
{
	struct anchor *a;

	if (!value || ds_grow((void **)&ps->anchors, &ps->capanchors, ps->nanchors + 1,
			      sizeof(*ps->anchors))) {
		json_decref(value);
		return -ENOMEM;
	}
	a = &ps->anchors[ps->nanchors];
	memset(a, 0, sizeof(*a));
	a->name = strdup(name);
	if (!a->name) {
		json_decref(value);
		return -ENOMEM;
	}
	a->value = value;
	a->nodes = 1;
	a->loc_first = a->loc_end = ps->locs ? ps->locs->n : 0;
	ps->nanchors++;
	return 0;
}

/* A node under construction: value plus bookkeeping for anchors and aliases. */
struct built {
	json_t *v;
	size_t nodes;
	int height;
};

static int parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		      struct built *out);

/* The short form of a tag ("tag:yaml.org,2002:int" -> "int"), NULL for others. */
static const char *core_tag(const yaml_char_t *tag)
{
	static const char prefix[] = "tag:yaml.org,2002:";

	if (!tag)
		return NULL;
	if (strncmp((const char *)tag, prefix, sizeof(prefix) - 1) == 0)
		return (const char *)tag + sizeof(prefix) - 1;
	return NULL;
}

/*
 * Type a scalar event: untagged plain scalars are resolved, quoted ones are
 * strings, core tags (!!str !!int !!float !!bool !!null) are honoured as
 * go-yaml does, other tags leave the text a string.
 */
static int scalar_res(struct ps *ps, const yaml_event_t *ev, struct res *r)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = core_tag(ev->data.scalar.tag);

	r->kind = R_STR;
	if (!ev->data.scalar.tag) {
		if (ev->data.scalar.plain_implicit)
			resolve_plain(s, len, r);
		return 0;
	}
	if (!tag)
		return 0; /* "!", "!foo", unknown: text */
	if (!strcmp(tag, "str") || !strcmp(tag, "binary") || !strcmp(tag, "timestamp"))
		return 0;
	if (strcmp(tag, "int") && strcmp(tag, "float") && strcmp(tag, "bool") &&
	    strcmp(tag, "null"))
		return 0; /* !!map, !!seq, !!merge, ... on a scalar: go-yaml keeps the text */
	resolve_plain(s, len, r);
	if (!strcmp(tag, "float") && r->kind == R_INT) {
		r->kind = R_REAL;
		r->d = (double)r->i;
	}
	if ((!strcmp(tag, "int") && r->kind == R_INT) ||
	    (!strcmp(tag, "float") && (r->kind == R_REAL || r->kind == R_NONFINITE)) ||
	    (!strcmp(tag, "bool") && r->kind == R_BOOL) ||
	    (!strcmp(tag, "null") && r->kind == R_NULL))
		return 0;
	if (!strcmp(tag, "int") && r->kind == R_REAL && r->big)
		return 0; /* an integer beyond int64 */
	return fail(ps, &ev->start_mark, -EBADMSG, "cannot decode %.*s as !!%s",
		    (int)(len > 64 ? 64 : len), s, tag);
}

/* Go's strconv.FormatFloat(v, 'g', -1, 32), as sigs.k8s.io/yaml turns float keys into strings. */
static void format_float32_key(double d, char *buf, size_t size)
{
	float f = (float)d;
	int prec, exp;
	char tmp[64];

	if (isnan(f)) {
		snprintf(buf, size, ".nan");
		return;
	}
	if (isinf(f)) {
		snprintf(buf, size, f > 0 ? ".inf" : "-.inf");
		return;
	}
	for (prec = 1; prec < 9; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)f);
		if (strtof(tmp, NULL) == f)
			break;
	}
	snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)f);
	exp = atoi(strchr(tmp, 'e') + 1);
	if (exp < -4 || exp >= 6) { /* Go: shortest %g switches at 1e6 */
		snprintf(buf, size, "%s", tmp);
	} else {
		int decimals = prec - 1 - exp;

		snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, (double)f);
	}
}

/* A JSON scalar as a mapping key string (sigs.k8s.io/yaml's key conversion). */
static int key_from_res(struct ps *ps, const yaml_mark_t *m, const struct res *r, char *buf,
			size_t size)
{
	switch (r->kind) {
	case R_NULL:
		return fail(ps, m, -EBADMSG, "unsupported mapping key: null");
	case R_BOOL:
		snprintf(buf, size, "%s", r->b ? "true" : "false");
		return 0;
	case R_INT:
		snprintf(buf, size, "%lld", r->i);
		return 0;
	case R_REAL:
	case R_NONFINITE:
		format_float32_key(r->d, buf, size);
		return 0;
	case R_STR:
	default:
		return -EINVAL; /* caller uses the text */
	}
}

static json_t *json_from_res(const struct res *r)
{
	switch (r->kind) {
	case R_NULL:
		return json_null();
	case R_BOOL:
		return json_boolean(r->b);
	case R_INT:
		return json_integer(r->i);
	case R_REAL:
		return json_real(r->d);
	default:
		return NULL;
	}
}

static int parse_scalar(struct ps *ps, yaml_event_t *ev, struct built *out)
{
	struct res r = {0};
	int rc = scalar_res(ps, ev, &r);

	if (rc)
		return rc;
	if (r.kind == R_NONFINITE)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "%s cannot be represented in JSON (quote it to keep it as a string)",
			    (const char *)ev->data.scalar.value);
	if (r.kind == R_STR)
		out->v = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
	else
		out->v = json_from_res(&r);
	if (!out->v)
		return fail(ps, &ev->start_mark, -ENOMEM, "out of memory");
	out->nodes = 1;
	out->height = 0;
	return 0;
}

static int parse_sequence(struct ps *ps, int depth, struct built *out)
{
	yaml_event_t ev;
	json_t *arr = json_array();
	size_t base = ps->ptrlen;
	int rc = 0;

	if (!arr)
		return -ENOMEM;
	out->nodes = 1;
	out->height = 0;
	for (size_t i = 0;; i++) {
		struct built c = {0};

		rc = next(ps, &ev);
		if (rc)
			goto out;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ps->locs && (rc = ptr_push_index(ps, i)) != 0) {
			yaml_event_delete(&ev);
			goto out;
		}
		rc = parse_node(ps, &ev, depth + 1, NULL, &c);
		ps->ptrlen = base;
		if (rc)
			goto out;
		if (json_array_append_new(arr, c.v)) {
			rc = -ENOMEM;
			goto out;
		}
		out->nodes += c.nodes;
		if (c.height + 1 > out->height)
			out->height = c.height + 1;
	}
	out->v = arr;
	arr = NULL;
out:
	json_decref(arr);
	return rc;
}

static bool is_merge_key(const yaml_event_t *ev)
{
	const char *tag = core_tag(ev->data.scalar.tag);

	if (ev->data.scalar.length != 2 || memcmp(ev->data.scalar.value, "<<", 2) != 0)
		return false;
	if (!ev->data.scalar.tag)
		return ev->data.scalar.plain_implicit;
	return tag && !strcmp(tag, "merge");
}

/* Find the first '/'-separated segment after `prefix` in an entry and unescape it. */
static bool entry_segment(const ds_yaml_locs *locs, const struct loc_entry *e, size_t prefix,
			  char *seg, size_t cap, size_t *seglen)
{
	const char *p = locs->arena + e->off + prefix;
	size_t len = e->len - prefix, n = 0;

	if (len < 2 || p[0] != '/')
		return false;
	for (size_t i = 1; i < len && p[i] != '/'; i++) {
		char c = p[i];

		if (c == '~' && i + 1 < len) {
			c = p[i + 1] == '1' ? '/' : '~';
			i++;
		}
		if (n + 1 >= cap)
			return false;
		seg[n++] = c;
	}
	*seglen = n;
	return true;
}

/*
 * Merge `src` (a mapping) into `obj`: keys already present stay (explicit keys
 * and earlier merge sources win), new ones are recorded in `merged`. With
 * locations, the entries of src (recorded under `src_prefix`) for the keys
 * taken are copied under the mapping's own pointer.
 */
static int merge_one(struct ps *ps, json_t *obj, json_t *merged, json_t *src, size_t loc_a,
		     size_t loc_b, const char *src_prefix, size_t src_prefix_len)
{
	void *it;
	json_t *taken = NULL;
	int rc = 0;

	if (ps->locs) {
		taken = json_object();
		if (!taken)
			return -ENOMEM;
	}
	for (it = json_object_iter(src); it; it = json_object_iter_next(src, it)) {
		const char *k = json_object_iter_key(it);
		size_t kl = json_object_iter_key_len(it);

		if (json_object_getn(obj, k, kl))
			continue;
		if (json_object_setn(obj, k, kl, json_object_iter_value(it)) ||
		    json_object_setn_new(merged, k, kl, json_null()) ||
		    (taken && json_object_setn_new(taken, k, kl, json_null()))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (ps->locs) {
		char seg[1024];
		size_t sl;
		size_t end = loc_b;

		for (size_t i = loc_a; i < end; i++) {
			struct loc_entry e = ps->locs->v[i];
			const char *p = ps->locs->arena + e.off;

			if (e.len <= src_prefix_len || memcmp(p, src_prefix, src_prefix_len) != 0)
				continue;
			if (!entry_segment(ps->locs, &e, src_prefix_len, seg, sizeof(seg), &sl))
				continue;
			if (!json_object_getn(taken, seg, sl))
				continue;
			/* The arena may move: copy the tail first. */
			{
				size_t tl = e.len - src_prefix_len;
				char *tail = malloc(tl);

				if (!tail) {
					rc = -ENOMEM;
					goto out;
				}
				memcpy(tail, p + src_prefix_len, tl);
				rc = loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail, tl,
					     &e.loc);
				free(tail);
				if (rc)
					goto out;
			}
		}
	}
out:
	json_decref(taken);
	return rc;
}

static int parse_mapping(struct ps *ps, int depth, struct built *out)
{
	yaml_event_t kev, vev;
	json_t *obj = json_object();
	json_t *merged = NULL; /* keys that came from "<<" (explicit keys replace them) */
	size_t base = ps->ptrlen;
	int rc = 0;
	bool have_kev = false;

	if (!obj)
		return -ENOMEM;
	out->nodes = 1;
	out->height = 0;
	for (;;) {
		struct built c = {0};
		struct res r = {0};
		char kbuf[64];
		const char *key;
		size_t klen;

		rc = next(ps, &kev);
		if (rc)
			goto out;
		have_kev = true;
		if (kev.type == YAML_MAPPING_END_EVENT)
			break;
		if (kev.type == YAML_SCALAR_EVENT && is_merge_key(&kev)) {
			size_t loc_a = ps->locs ? ps->locs->n : 0;
			char *prefix = NULL;
			size_t plen = 0;

			if (ps->locs) {
				if ((rc = ptr_push(ps, "<<", 2)) != 0)
					goto out;
				prefix = strndup(ps->ptr, ps->ptrlen);
				plen = ps->ptrlen;
				if (!prefix) {
					rc = -ENOMEM;
					goto out;
				}
			}
			rc = next(ps, &vev);
			if (!rc)
				rc = parse_node(ps, &vev, depth + 1, &kev.start_mark, &c);
			ps->ptrlen = base;
			if (!rc && !merged && !(merged = json_object()))
				rc = -ENOMEM;
			if (!rc && json_is_object(c.v)) {
				rc = merge_one(ps, obj, merged, c.v, loc_a,
					       ps->locs ? ps->locs->n : 0, prefix, plen);
			} else if (!rc && json_is_array(c.v)) {
				size_t i;
				json_t *m;
				size_t loc_b = ps->locs ? ps->locs->n : 0;

				json_array_foreach (c.v, i, m) {
					if (!json_is_object(m)) {
						rc = fail(ps, &kev.start_mark, -EBADMSG,
							  "merge key '<<' needs a mapping or a "
							  "list of mappings");
						break;
					}
				}
				/* Earlier sources win, so merge them first. */
				json_array_foreach (c.v, i, m) {
					char *ip = NULL;

					if (rc)
						break;
					if (ps->locs &&
					    asprintf(&ip, "%.*s/%zu", (int)plen, prefix, i) < 0) {
						ip = NULL;
						rc = -ENOMEM;
						break;
					}
					rc = merge_one(ps, obj, merged, m, loc_a, loc_b, ip,
						       ip ? strlen(ip) : 0);
					free(ip);
				}
			} else if (!rc) {
				rc = fail(ps, &kev.start_mark, -EBADMSG,
					  "merge key '<<' needs a mapping or a list of mappings");
			}
			if (!rc) {
				out->nodes += c.nodes;
				if (c.height > out->height)
					out->height = c.height;
			}
			free(prefix);
			json_decref(c.v);
			yaml_event_delete(&kev);
			have_kev = false;
			if (rc)
				goto out;
			continue;
		}
		if (kev.type == YAML_SCALAR_EVENT) {
			rc = scalar_res(ps, &kev, &r);
			if (rc)
				goto out;
			if (r.kind == R_STR) {
				key = (const char *)kev.data.scalar.value;
				klen = kev.data.scalar.length;
			} else {
				rc = key_from_res(ps, &kev.start_mark, &r, kbuf, sizeof(kbuf));
				if (rc)
					goto out;
				key = kbuf;
				klen = strlen(kbuf);
			}
			if (kev.data.scalar.anchor) {
				json_t *kv = r.kind == R_STR || r.kind == R_NONFINITE
						 ? json_stringn(key, klen)
						 : json_from_res(&r);

				rc = anchor_add(ps, (const char *)kev.data.scalar.anchor, kv);
				if (rc)
					goto out;
			}
		} else if (kev.type == YAML_ALIAS_EVENT) {
			struct anchor *a = anchor_find(ps, (const char *)kev.data.alias.anchor);

			if (!a || !a->value) {
				rc = fail(ps, &kev.start_mark, -EBADMSG, "unknown anchor '%s'",
					  (const char *)kev.data.alias.anchor);
				goto out;
			}
			if (json_is_string(a->value)) {
				key = json_string_value(a->value);
				klen = json_string_length(a->value);
			} else {
				r.kind = json_is_null(a->value)	     ? R_NULL
					 : json_is_boolean(a->value) ? R_BOOL
					 : json_is_integer(a->value) ? R_INT
					 : json_is_real(a->value)    ? R_REAL
								     : R_STR;
				r.b = json_is_true(a->value);
				r.i = json_integer_value(a->value);
				r.d = json_real_value(a->value);
				if (r.kind == R_STR) {
					rc =
					    fail(ps, &kev.start_mark, -EBADMSG,
						 "unsupported mapping key: a %s",
						 json_is_object(a->value) ? "mapping" : "sequence");
					goto out;
				}
				rc = key_from_res(ps, &kev.start_mark, &r, kbuf, sizeof(kbuf));
				if (rc)
					goto out;
				key = kbuf;
				klen = strlen(kbuf);
			}
		} else {
			rc = fail(ps, &kev.start_mark, -EBADMSG, "unsupported mapping key: a %s",
				  kev.type == YAML_MAPPING_START_EVENT ? "mapping" : "sequence");
			goto out;
		}
		if (memchr(key, '\0', klen)) {
			/* jansson's json_equal() and json_deep_copy() stop keys at a NUL. */
			rc = fail(ps, &kev.start_mark, -EBADMSG,
				  "mapping key contains a NUL character");
			goto out;
		}
		if (json_object_getn(obj, key, klen)) {
			if (!merged || !json_object_getn(merged, key, klen)) {
				rc = fail(ps, &kev.start_mark, -EBADMSG, "duplicate key '%.*s'",
					  (int)(klen > 128 ? 128 : klen), key);
				goto out;
			}
			json_object_deln(merged, key, klen);
		}
		if (ps->locs && (rc = ptr_push(ps, key, klen)) != 0)
			goto out;
		rc = next(ps, &vev);
		if (!rc)
			rc = parse_node(ps, &vev, depth + 1, &kev.start_mark, &c);
		ps->ptrlen = base;
		if (rc)
			goto out;
		if (json_object_setn_new(obj, key, klen, c.v)) {
			rc = -ENOMEM;
			goto out;
		}
		out->nodes += c.nodes;
		if (c.height + 1 > out->height)
			out->height = c.height + 1;
		yaml_event_delete(&kev);
		have_kev = false;
	}
	out->v = obj;
	obj = NULL;
out:
	if (have_kev)
		yaml_event_delete(&kev);
	json_decref(merged);
	json_decref(obj);
	return rc;
}

static int parse_alias(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		       struct built *out)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct anchor *a = anchor_find(ps, name);
	size_t budget = ps->nodes > DS_YAML_MIN_ALIAS_BUDGET ? ps->nodes : DS_YAML_MIN_ALIAS_BUDGET;
	int rc;

	if (!a)
		return fail(ps, &ev->start_mark, -EBADMSG, "unknown anchor '%s'", name);
	if (!a->value)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "alias '*%s' refers to a node that contains it", name);
	if (depth + a->height > DS_YAML_MAX_DEPTH)
		return fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
			    DS_YAML_MAX_DEPTH);
	if (a->nodes > budget - ps->alias_nodes)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "aliases expand to more than %zu nodes (alias bomb?)", budget);
	ps->alias_nodes += a->nodes;
	out->v = json_deep_copy(a->value);
	if (!out->v)
		return -ENOMEM;
	out->nodes = a->nodes;
	out->height = a->height;
	rc = record(ps, &ev->start_mark, keymark);
	if (rc || !ps->locs)
		return rc;
	/* Copy the anchor's inner locations under the alias's pointer. */
	for (size_t i = a->loc_first + 1; i < a->loc_end; i++) {
		struct loc_entry e = ps->locs->v[i];
		size_t tl = e.len - a->prefix_len;
		char *tail = malloc(tl ? tl : 1);

		if (!tail)
			return -ENOMEM;
		memcpy(tail, ps->locs->arena + e.off + a->prefix_len, tl);
		rc = loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail, tl, &e.loc);
		free(tail);
		if (rc)
			return rc;
	}
	return 0;
}

/* Build the value of the node that starts with *ev (consumed). */
static int parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		      struct built *out)
{
	const yaml_char_t *anchor = NULL;
	size_t ai = 0;
	int rc = 0;

	if (depth > DS_YAML_MAX_DEPTH) {
		rc = fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
			  DS_YAML_MAX_DEPTH);
		goto out;
	}
	if (ev->type == YAML_ALIAS_EVENT) {
		rc = parse_alias(ps, ev, depth, keymark, out);
		goto out;
	}
	if (ev->type == YAML_SCALAR_EVENT)
		anchor = ev->data.scalar.anchor;
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		anchor = ev->data.sequence_start.anchor;
	else if (ev->type == YAML_MAPPING_START_EVENT)
		anchor = ev->data.mapping_start.anchor;
	else {
		rc = fail(ps, &ev->start_mark, -EBADMSG, "unexpected YAML event");
		goto out;
	}
	if (anchor) {
		struct anchor *a;

		rc = ds_grow((void **)&ps->anchors, &ps->capanchors, ps->nanchors + 1,
			     sizeof(*ps->anchors));
		if (rc)
			goto out;
		a = &ps->anchors[ps->nanchors];
		memset(a, 0, sizeof(*a));
		a->name = strdup((const char *)anchor);
		if (!a->name) {
			rc = -ENOMEM;
			goto out;
		}
		a->loc_first = ps->locs ? ps->locs->n : 0;
		a->prefix_len = ps->ptrlen;
		ai = ++ps->nanchors;
	}
	ps->nodes++;
	rc = record(ps, &ev->start_mark, keymark);
	if (rc)
		goto out;
	if (ev->type == YAML_SCALAR_EVENT)
		rc = parse_scalar(ps, ev, out);
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		rc = parse_sequence(ps, depth, out);
	else
		rc = parse_mapping(ps, depth, out);
	if (!rc && ai) {
		struct anchor *a = &ps->anchors[ai - 1];

		a->value = json_incref(out->v);
		a->nodes = out->nodes;
		a->height = out->height;
		a->loc_end = ps->locs ? ps->locs->n : 0;
	}
out:
	yaml_event_delete(ev);
	return rc;
}

static int parse_stream(struct ps *ps, json_t *docs)
{
	yaml_event_t ev;
	int rc;

	for (;;) {
		struct built root = {0};
		size_t loc_mark = ps->locs ? ps->locs->n : 0;

		rc = next(ps, &ev);
		if (rc)
			return rc;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_DOCUMENT_START_EVENT) { /* stream start */
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		rc = next(ps, &ev);
		if (rc)
			return rc;
		ps->ptrlen = 0;
		rc = parse_node(ps, &ev, 1, NULL, &root);
		anchors_clear(ps);
		if (rc)
			return rc;
		rc = next(ps, &ev); /* document end */
		if (rc) {
			json_decref(root.v);
			return rc;
		}
		yaml_event_delete(&ev);
		if (json_is_null(root.v)) {
			/* Empty (or null) documents are skipped, as kubectl does. */
			json_decref(root.v);
			if (ps->locs)
				ps->locs->n = loc_mark;
			continue;
		}
		if (json_array_append_new(docs, root.v))
			return -ENOMEM;
		ps->doc++;
	}
}

/* Height of a jansson value, stopping once it exceeds `limit`. */
static int height_over(const json_t *v, int limit)
{
	int h = 0;

	if (limit < 0)
		return 1;
	if (json_is_object(v)) {
		const char *k;
		json_t *c;

		json_object_foreach ((json_t *)v, k, c) {
			int ch = height_over(c, limit - 1) + 1;

			if (ch > h)
				h = ch;
			if (h > limit)
				break;
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *c;

		json_array_foreach (v, i, c) {
			int ch = height_over(c, limit - 1) + 1;

			if (ch > h)
				h = ch;
			if (h > limit)
				break;
		}
	}
	return h;
}

/*
 * JSON fast path: a stream of JSON texts starting with '{' or '[' (kubectl
 * reads a '{' stream with a JSON decoder, so surrogate pairs and concatenated
 * objects are JSON's). Returns 1 when the input is not plain JSON within our
 * bounds (duplicate keys, NUL in strings, big numbers, too deep...); the YAML
 * path then reads it and reports any error with its location.
 */
static int parse_json_stream(const char *buf, size_t len, json_t *docs)
{
	size_t off = 0;

	for (;;) {
		json_error_t jerr;
		json_t *v;

		while (off < len && (buf[off] == ' ' || buf[off] == '\t' || buf[off] == '\n' ||
				     buf[off] == '\r'))
			off++;
		if (off == len)
			return json_array_size(docs) ? 0 : 1;
		if (buf[off] != '{' && buf[off] != '[')
			return 1;
		v = json_loadb(buf + off, len - off,
			       JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &jerr);
		if (!v)
			return 1;
		if (height_over(v, DS_YAML_MAX_DEPTH - 1) > DS_YAML_MAX_DEPTH - 1) {
			json_decref(v);
			return 1;
		}
		if (json_array_append_new(docs, v))
			return 1;
		off += (size_t)jerr.position;
	}
}

int ds_yaml_parse(const char *buf, size_t len, const char *filename, unsigned flags,
		  json_t **docs_out, ds_yaml_locs **locs_out, ds_err *err)
{
	struct ps ps;
	json_t *docs = NULL;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.buf = buf;
	ps.len = len;
	ps.file = filename ? filename : "-";
	ps.err = err;
	if (!docs_out || (!buf && len)) {
		ds_err_set(err, "ds_yaml_parse: invalid arguments");
		return -EINVAL;
	}
	if (len > DS_YAML_MAX_INPUT) {
		ds_err_setloc(err, ps.file, 0, 0, "input larger than %u bytes", DS_YAML_MAX_INPUT);
		return -E2BIG;
	}
	if (!yaml_parser_initialize(&ps.p)) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&ps.p, (const unsigned char *)(buf ? buf : ""), len);
	docs = json_array();
	if (!docs) {
		rc = -ENOMEM;
		goto out;
	}
	if (flags & DS_YAML_LOCATIONS) {
		ps.locs = calloc(1, sizeof(*ps.locs));
		if (!ps.locs || !(ps.locs->file = strdup(ps.file))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (parse_json_stream(buf ? buf : "", len, docs) == 0) {
		rc = 0;
		if (ps.locs) {
			/* Positions come from the YAML reader; JSON it cannot read (surrogate
			 * escapes, concatenated texts) simply has none. */
			json_t *ydocs = json_array();

			if (!ydocs) {
				rc = -ENOMEM;
				goto out;
			}
			if (parse_stream(&ps, ydocs)) {
				ps.locs->n = 0;
				ds_err_clear(err);
			}
			json_decref(ydocs);
		}
	} else {
		json_array_clear(docs);
		rc = parse_stream(&ps, docs);
	}
	if (!rc && ps.locs)
		rc = locs_index(ps.locs);
	if (rc)
		goto out;
	*docs_out = docs;
	docs = NULL;
	if (locs_out) {
		*locs_out = ps.locs;
		ps.locs = NULL;
	}
out:
	if (rc == -ENOMEM && err && !err->msg[0])
		ds_err_set(err, "out of memory");
	anchors_clear(&ps);
	free(ps.anchors);
	free(ps.ptr);
	ds_yaml_locs_free(ps.locs);
	json_decref(docs);
	yaml_parser_delete(&ps.p);
	return ds_err_fallback(err, rc);
}

int ds_yaml_read_file(const char *path, char **out, size_t *len_out, ds_err *err)
{
	FILE *f = NULL;
	char *buf = NULL;
	size_t len = 0;
	int rc = 0;
	bool is_stdin = path && strcmp(path, "-") == 0;

	if (!path) {
		ds_err_set(err, "ds_yaml_read_file: no path");
		return -EINVAL;
	}
	f = is_stdin ? stdin : fopen(path, "rb");
	if (!f) {
		rc = -errno;
		ds_err_setloc(err, path, 0, 0, "cannot open: %s", strerror(errno));
		return ds_err_fallback(err, rc);
	}
	rc = ds_read_stream(f, DS_YAML_MAX_INPUT, &buf, &len);
	if (rc == -E2BIG)
		ds_err_setloc(err, path, 0, 0, "input larger than %u bytes", DS_YAML_MAX_INPUT);
	else if (rc == -EIO)
		ds_err_setloc(err, path, 0, 0, "read error");
	else if (rc < 0)
		ds_err_set(err, "out of memory");
	if (!is_stdin)
		fclose(f);
	if (rc < 0)
		return rc;
	*out = buf;
	if (len_out)
		*len_out = len;
	return 0;
}

int ds_yaml_parse_file(const char *path, unsigned flags, json_t **docs_out, ds_yaml_locs **locs_out,
		       ds_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = ds_yaml_read_file(path, &buf, &len, err);

	if (rc < 0)
		return rc;
	rc = ds_yaml_parse(buf, len, path, flags, docs_out, locs_out, err);
	free(buf);
	return ds_err_fallback(err, rc);
}

/* ------------------------------------------------------------------ */
/* Emitter                                                             */

/*
 * True when a string written as a plain scalar would not read back as the
 * same string here or in kubectl: it resolves to another type, is a merge
 * key, or is something other YAML 1.1 readers type (timestamps, base 60).
 * Syntactic safety (indicators, ": ", " #", spaces, line breaks) is left to
 * libyaml's emitter analysis.
 */
static bool needs_quotes(const char *s, size_t len)
{
	struct res r = {0};

	resolve_plain(s, len, &r);
	if (r.kind != R_STR)
		return true;
	if (eq(s, len, "<<") || eq(s, len, "=") || looks_like_timestamp(s, len))
		return true;
	/* Base 60 numbers ("1:20", "-3:25:45.5") are ints/floats to YAML 1.1 readers. */
	if (len &&
	    (is_digit(s[0]) || ((s[0] == '+' || s[0] == '-') && len > 1 && is_digit(s[1])))) {
		bool colon = false, ok = true;

		for (size_t i = 1; i < len && ok; i++)
			if (s[i] == ':')
				colon = true;
			else if (!is_digit(s[i]) && s[i] != '_' && s[i] != '.')
				ok = false;
		if (ok && colon)
			return true;
	}
	/* A string ending in a line break or with special characters goes through libyaml's
	 * analysis; anything with a NUL must be double-quoted (libyaml escapes it). */
	return memchr(s, '\0', len) != NULL;
}

struct sbuf {
	char *p;
	size_t len, cap;
};

static int sbuf_write(void *data, unsigned char *buffer, size_t size)
{
	struct sbuf *b = data;

	if (ds_grow((void **)&b->p, &b->cap, b->len + size + 1, 1))
		return 0;
	memcpy(b->p + b->len, buffer, size);
	b->len += size;
	b->p[b->len] = '\0';
	return 1;
}

struct em {
	yaml_emitter_t e;
	ds_err *err;
	int rc;
};

static int em_fail(struct em *em)
{
	switch (em->e.error) {
	case YAML_MEMORY_ERROR:
		ds_err_set(em->err, "out of memory while writing YAML");
		return -ENOMEM;
	case YAML_WRITER_ERROR:
		ds_err_set(em->err, "cannot write YAML: %s",
			   em->e.problem ? em->e.problem : "write error");
		return -EIO;
	default:
		ds_err_set(em->err, "cannot write YAML: %s",
			   em->e.problem ? em->e.problem : "emitter error");
		return -EINVAL;
	}
}

static int emit_event(struct em *em, yaml_event_t *ev)
{
	if (!yaml_emitter_emit(&em->e, ev))
		return em_fail(em);
	return 0;
}

static int emit_string(struct em *em, const char *s, size_t len)
{
	yaml_event_t ev;
	bool quote = needs_quotes(s, len);
	yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;

	if (memchr(s, '\0', len))
		style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	else if (memchr(s, '\n', len))
		style = YAML_LITERAL_SCALAR_STYLE; /* libyaml falls back to "..." when unsafe */
	if (len > INT_MAX) {
		ds_err_set(em->err, "string too long for YAML");
		return -EINVAL;
	}
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)s, (int)len,
					  !quote, 1, style))
		return -ENOMEM;
	return emit_event(em, &ev);
}

static int emit_plain(struct em *em, const char *s)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)s,
					  (int)strlen(s), 1, 1, YAML_PLAIN_SCALAR_STYLE))
		return -ENOMEM;
	return emit_event(em, &ev);
}

/* Shortest text that reads back as the same double and as a float, not an int. */
static void format_real(double d, char *buf, size_t size)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".eEn")) {
		size_t n = strlen(buf);

		if (n + 3 <= size)
			memcpy(buf + n, ".0", 3);
	}
}

static int emit_value(struct em *em, const json_t *v, int depth)
{
	yaml_event_t ev;
	char num[64];
	int rc = 0;

	if (depth > DS_YAML_MAX_DEPTH) {
		ds_err_set(em->err, "value nested deeper than %d levels", DS_YAML_MAX_DEPTH);
		return -EINVAL;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		bool empty = json_object_size(v) == 0;

		if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							 empty ? YAML_FLOW_MAPPING_STYLE
							       : YAML_BLOCK_MAPPING_STYLE))
			return -ENOMEM;
		if ((rc = emit_event(em, &ev)) != 0)
			return rc;
		for (void *it = json_object_iter((json_t *)v); it;
		     it = json_object_iter_next((json_t *)v, it)) {
			rc =
			    emit_string(em, json_object_iter_key(it), json_object_iter_key_len(it));
			if (!rc)
				rc = emit_value(em, json_object_iter_value(it), depth + 1);
			if (rc)
				return rc;
		}
		if (!yaml_mapping_end_event_initialize(&ev))
			return -ENOMEM;
		return emit_event(em, &ev);
	}
	case JSON_ARRAY: {
		bool empty = json_array_size(v) == 0;

		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  empty ? YAML_FLOW_SEQUENCE_STYLE
								: YAML_BLOCK_SEQUENCE_STYLE))
			return -ENOMEM;
		if ((rc = emit_event(em, &ev)) != 0)
			return rc;
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((rc = emit_value(em, json_array_get(v, i), depth + 1)) != 0)
				return rc;
		if (!yaml_sequence_end_event_initialize(&ev))
			return -ENOMEM;
		return emit_event(em, &ev);
	}
	case JSON_STRING:
		return emit_string(em, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return emit_plain(em, num);
	case JSON_REAL:
		format_real(json_real_value(v), num, sizeof(num));
		return emit_plain(em, num);
	case JSON_TRUE:
		return emit_plain(em, "true");
	case JSON_FALSE:
		return emit_plain(em, "false");
	case JSON_NULL:
	default:
		return emit_plain(em, "null");
	}
}

static int emit_doc(struct em *em, const json_t *value)
{
	yaml_event_t ev;
	int rc;

	if (!value) {
		ds_err_set(em->err, "no value to write");
		return -EINVAL;
	}
	yaml_emitter_set_unicode(&em->e, 1);
	yaml_emitter_set_indent(&em->e, 2);
	yaml_emitter_set_width(&em->e, -1);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if ((rc = emit_value(em, value, 1)) != 0)
		return rc;
	if (!yaml_document_end_event_initialize(&ev, 1))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_stream_end_event_initialize(&ev))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_emitter_flush(&em->e))
		return em_fail(em);
	return 0;
}

int ds_yaml_emit_string(const json_t *value, char **out, ds_err *err)
{
	struct em em;
	struct sbuf b = {0};
	int rc;

	if (!out) {
		ds_err_set(err, "ds_yaml_emit_string: no output");
		return -EINVAL;
	}
	memset(&em, 0, sizeof(em));
	em.err = err;
	if (!yaml_emitter_initialize(&em.e)) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	yaml_emitter_set_output(&em.e, sbuf_write, &b);
	rc = emit_doc(&em, value);
	yaml_emitter_delete(&em.e);
	if (!rc && !b.p && ds_grow((void **)&b.p, &b.cap, 1, 1))
		rc = -ENOMEM;
	if (rc) {
		if (rc == -ENOMEM && err && !err->msg[0])
			ds_err_set(err, "out of memory");
		free(b.p);
		return ds_err_fallback(err, rc);
	}
	if (!b.len)
		b.p[0] = '\0';
	*out = b.p;
	return 0;
}

int ds_yaml_emit(FILE *out, const json_t *value, ds_err *err)
{
	char *s = NULL;
	int rc;

	if (!out) {
		ds_err_set(err, "ds_yaml_emit: no output");
		return -EINVAL;
	}
	/* Emit into memory first so a failure writes nothing partial. */
	rc = ds_yaml_emit_string(value, &s, err);
	if (rc)
		return ds_err_fallback(err, rc);
	if (fputs(s, out) == EOF) {
		ds_err_set(err, "cannot write YAML: %s", strerror(errno));
		rc = -EIO;
	}
	free(s);
	return ds_err_fallback(err, rc);
}
