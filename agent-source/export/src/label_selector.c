#include "drasync/label_selector.h"

#include "drasync/buf.h"
#include "drasync/k8s_object.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SELECTOR 4096 /* bytes: a selector is a line in a config file */

enum op { OP_EXISTS, OP_NOT_EXISTS, OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_GT, OP_LT };

struct req {
	char *key;
	enum op op;
	char **values;
	size_t n_values, cap_values;
	long long num; /* OP_GT, OP_LT */
};

struct ds_label_selector {
	struct req *reqs;
	size_t n, cap;
};

enum tok_kind { T_END, T_IDENT, T_NOT, T_NE, T_EQ, T_EQEQ, T_GT, T_LT, T_OPEN, T_CLOSE, T_COMMA };

struct tok {
	enum tok_kind kind;
	const char *s;
	size_t len, col;
};

struct lexer {
	const char *s;
	size_t pos, len;
	struct tok cur; /* the lookahead */
	size_t *col_out;
	ds_err *err;
};

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool special(char c)
{
	return strchr("=!(),><", c) != NULL && c != '\0';
}

/* The next token, as the apimachinery lexer cuts them: operators longest first. */
static void advance(struct lexer *l)
{
	struct tok t = {T_END, NULL, 0, 0};
	size_t p = l->pos;

	while (p < l->len && blank(l->s[p]))
		p++;
	t.s = l->s + p;
	t.col = p + 1;
	if (p < l->len && special(l->s[p])) {
		char c = l->s[p], d = p + 1 < l->len ? l->s[p + 1] : '\0';

		t.len = 1;
		if (c == '!' && d == '=') {
			t.kind = T_NE;
			t.len = 2;
		} else if (c == '=' && d == '=') {
			t.kind = T_EQEQ;
			t.len = 2;
		} else {
			t.kind = c == '!'   ? T_NOT
				 : c == '=' ? T_EQ
				 : c == '>' ? T_GT
				 : c == '<' ? T_LT
				 : c == '(' ? T_OPEN
				 : c == ')' ? T_CLOSE
					    : T_COMMA;
		}
	} else if (p < l->len) {
		t.kind = T_IDENT;
		while (p + t.len < l->len && !blank(l->s[p + t.len]) && !special(l->s[p + t.len]))
			t.len++;
	}
	l->pos = p + t.len;
	l->cur = t;
}

static int fail(struct lexer *l, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct lexer *l, size_t col, const char *fmt, ...)
{
	char msg[sizeof(l->err->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (l->col_out)
		*l->col_out = col;
	ds_err_set(l->err, "%s", msg);
	return -EINVAL;
}

/* "found 'x', expected: ..." for the token at hand. */
static int unexpected(struct lexer *l, const char *expected)
{
	if (l->cur.kind == T_END)
		return fail(l, l->cur.col, "found end of string, expected: %s", expected);
	return fail(l, l->cur.col, "found '%.*s', expected: %s", (int)l->cur.len, l->cur.s,
		    expected);
}

static bool is_word(const struct tok *t, const char *w)
{
	return t->kind == T_IDENT && t->len == strlen(w) && memcmp(t->s, w, t->len) == 0;
}

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label value's shape, also the name part of a key (which may not be empty). */
static bool name_valid(const char *s, size_t len)
{
	if (len > 63)
		return false;
	if (len == 0)
		return true;
	if (!alnum(s[0]) || !alnum(s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

bool ds_label_value_valid(const char *s, size_t len)
{
	return name_valid(s, len);
}

/* Why a key is not a qualified name, or NULL when it is one. */
static const char *key_problem(const char *s, size_t len)
{
	const char *slash = memchr(s, '/', len);
	const char *name = slash ? slash + 1 : s;
	size_t nlen = len - (size_t)(name - s);

	if (slash) {
		char prefix[254];
		size_t plen = (size_t)(slash - s);

		if (memchr(name, '/', nlen))
			return "a key has at most one '/' (prefix/name)";
		if (plen == 0)
			return "the prefix before '/' is empty";
		if (plen >= sizeof(prefix))
			return "the prefix is longer than 253 characters";
		memcpy(prefix, s, plen);
		prefix[plen] = '\0';
		if (!ds_dns_subdomain_valid(prefix))
			return "the prefix must be a DNS subdomain (lowercase letters, digits, '-' "
			       "and '.')";
	}
	if (nlen == 0)
		return "the name part is empty";
	if (nlen > 63)
		return "the name part is longer than 63 characters";
	if (!name_valid(name, nlen))
		return "the name part must be letters, digits, '-', '_' or '.', starting and "
		       "ending with a letter or digit";
	return NULL;
}

bool ds_label_key_valid(const char *s, size_t len)
{
	return key_problem(s, len) == NULL;
}

static int add_value(struct req *r, const char *s, size_t len)
{
	/* Sets: "a, a" is one value. */
	for (size_t i = 0; i < r->n_values; i++)
		if (strlen(r->values[i]) == len && memcmp(r->values[i], s, len) == 0)
			return 0;
	if (ds_grow((void **)&r->values, &r->cap_values, r->n_values + 1, sizeof(*r->values)) < 0)
		return -ENOMEM;
	r->values[r->n_values] = strndup(s, len);
	if (!r->values[r->n_values])
		return -ENOMEM;
	r->n_values++;
	return 0;
}

static int value(struct lexer *l, struct req *r, const struct tok *t)
{
	if (!ds_label_value_valid(t->s, t->len))
		return fail(l, t->col,
			    "invalid value '%.*s' for label '%s': at most 63 letters, digits, '-', "
			    "'_' or '.', starting and ending with a letter or digit",
			    (int)t->len, t->s, r->key);
	return add_value(r, t->s, t->len);
}

/* "(" [values separated by ","] ")": empty values are allowed, "()" is {""}. */
static int value_set(struct lexer *l, struct req *r)
{
	bool need_value = true; /* at the start and after each comma */
	int rc;

	if (l->cur.kind != T_OPEN)
		return unexpected(l, "'('");
	advance(l);
	for (;;) {
		struct tok t = l->cur;

		if (t.kind == T_IDENT) {
			if (!need_value)
				return unexpected(l, "',' or ')'");
			if ((rc = value(l, r, &t)) < 0)
				return rc;
			need_value = false;
		} else if (t.kind == T_COMMA || t.kind == T_CLOSE) {
			if (need_value && (rc = add_value(r, "", 0)) < 0)
				return rc;
			if (t.kind == T_CLOSE) {
				advance(l);
				return 0;
			}
			need_value = true;
		} else {
			return unexpected(l, need_value ? "',', ')' or a value" : "',' or ')'");
		}
		advance(l);
	}
}

static int integer(const struct tok *t, long long *out)
{
	char buf[32], *end;
	long long v;

	if (t->len == 0 || t->len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, t->s, t->len);
	buf[t->len] = '\0';
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || *end || !(buf[0] == '-' || buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9')))
		return -EINVAL;
	*out = v;
	return 0;
}

static int requirement(struct lexer *l, struct req *r)
{
	struct tok key;
	const char *why;
	int rc;

	if (l->cur.kind == T_NOT) {
		r->op = OP_NOT_EXISTS;
		advance(l);
		if (l->cur.kind != T_IDENT)
			return unexpected(l, "a label key after '!'");
	}
	key = l->cur;
	if ((why = key_problem(key.s, key.len)) != NULL)
		return fail(l, key.col, "invalid label key '%.*s': %s", (int)key.len, key.s, why);
	r->key = strndup(key.s, key.len);
	if (!r->key)
		return -ENOMEM;
	advance(l);
	if (l->cur.kind == T_END || l->cur.kind == T_COMMA) {
		if (r->op != OP_NOT_EXISTS)
			r->op = OP_EXISTS;
		return 0;
	}
	if (r->op == OP_NOT_EXISTS)
		return unexpected(l, "',' or end of string ('!key' takes no value)");
	switch (l->cur.kind) {
	case T_EQ:
	case T_EQEQ:
		r->op = OP_EQ;
		break;
	case T_NE:
		r->op = OP_NE;
		break;
	case T_GT:
		r->op = OP_GT;
		break;
	case T_LT:
		r->op = OP_LT;
		break;
	default:
		if (is_word(&l->cur, "in"))
			r->op = OP_IN;
		else if (is_word(&l->cur, "notin"))
			r->op = OP_NOTIN;
		else
			return unexpected(l, "=, ==, !=, in, notin, >, <, ',' or end of string");
	}
	advance(l);
	if (r->op == OP_IN || r->op == OP_NOTIN)
		return value_set(l, r);
	/* One value; nothing (end or ',') is the empty value. */
	if (l->cur.kind == T_END || l->cur.kind == T_COMMA) {
		if (r->op == OP_GT || r->op == OP_LT)
			return unexpected(l, "an integer");
		return add_value(r, "", 0);
	}
	if (l->cur.kind != T_IDENT)
		return unexpected(l, "a value");
	if (r->op == OP_GT || r->op == OP_LT) {
		if (integer(&l->cur, &r->num) < 0)
			return fail(l, l->cur.col,
				    "'%.*s' is not an integer ('>' and '<' compare integers)",
				    (int)l->cur.len, l->cur.s);
		if ((rc = add_value(r, l->cur.s, l->cur.len)) < 0)
			return rc;
	} else if ((rc = value(l, r, &l->cur)) < 0) {
		return rc;
	}
	advance(l);
	return 0;
}

static void req_dispose(struct req *r)
{
	free(r->key);
	for (size_t i = 0; i < r->n_values; i++)
		free(r->values[i]);
	free(r->values);
}

int ds_label_selector_parse(ds_label_selector **out, const char *s, size_t *col_out, ds_err *err)
{
	struct lexer l = {.s = s, .col_out = col_out, .err = err};
	ds_label_selector *sel = NULL;
	int rc = 0;

	if (col_out)
		*col_out = 0;
	l.len = s ? strlen(s) : 0;
	if (l.len > MAX_SELECTOR)
		return fail(&l, 0, "selector longer than %d bytes", MAX_SELECTOR);
	sel = calloc(1, sizeof(*sel));
	if (!sel) {
		rc = -ENOMEM;
		goto out;
	}
	advance(&l);
	while (l.cur.kind != T_END) {
		if (l.cur.kind != T_IDENT && l.cur.kind != T_NOT) {
			rc = unexpected(&l, "!, a label key, or end of string");
			goto out;
		}
		if ((rc = ds_grow((void **)&sel->reqs, &sel->cap, sel->n + 1, sizeof(*sel->reqs))) <
		    0)
			goto out;
		memset(&sel->reqs[sel->n], 0, sizeof(*sel->reqs));
		sel->n++;
		if ((rc = requirement(&l, &sel->reqs[sel->n - 1])) < 0)
			goto out;
		if (l.cur.kind == T_END)
			break;
		if (l.cur.kind != T_COMMA) {
			rc = unexpected(&l, "',' or end of string");
			goto out;
		}
		advance(&l);
		if (l.cur.kind != T_IDENT && l.cur.kind != T_NOT) {
			rc = unexpected(&l, "a label key after ','");
			goto out;
		}
	}
	*out = sel;
	sel = NULL;
out:
	if (rc == -ENOMEM)
		ds_err_set(err, "out of memory");
	ds_label_selector_free(sel);
	return rc;
}

void ds_label_selector_free(ds_label_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++)
		req_dispose(&sel->reqs[i]);
	free(sel->reqs);
	free(sel);
}

size_t ds_label_selector_count(const ds_label_selector *sel)
{
	return sel->n;
}

static bool in_set(const struct req *r, const char *v)
{
	for (size_t i = 0; i < r->n_values; i++)
		if (strcmp(r->values[i], v) == 0)
			return true;
	return false;
}

static bool req_matches(const struct req *r, const json_t *labels)
{
	json_t *j = labels ? json_object_get(labels, r->key) : NULL;
	const char *v = json_is_string(j) ? json_string_value(j) : NULL;
	struct tok t;
	long long n;

	switch (r->op) {
	case OP_EXISTS:
		return v != NULL;
	case OP_NOT_EXISTS:
		return v == NULL;
	case OP_EQ:
	case OP_IN:
		return v && in_set(r, v);
	case OP_NE:
	case OP_NOTIN:
		return !v || !in_set(r, v);
	case OP_GT:
	case OP_LT:
		if (!v)
			return false;
		t.s = v;
		t.len = strlen(v);
		if (integer(&t, &n) < 0)
			return false;
		return r->op == OP_GT ? n > r->num : n < r->num;
	}
	return false;
}

bool ds_label_selector_matches(const ds_label_selector *sel, const json_t *labels)
{
	for (size_t i = 0; i < sel->n; i++)
		if (!req_matches(&sel->reqs[i], labels))
			return false;
	return true;
}
