/*
 * The YAML module's resolver: plain scalars typed with the rules of the
 * go-yaml v2 fork inside sigs.k8s.io/yaml, which is what kubectl uses.
 */
#include "yaml_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

bool ds_yaml_looks_like_timestamp(const char *s, size_t len)
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
	if (ds_yaml_looks_like_timestamp(s, len))
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

void ds_yaml_resolve_plain(const char *s, size_t len, struct res *r)
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
