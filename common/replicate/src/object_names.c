#include "drasync/object_names.h"

#include "drasync/kinds.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* apimachinery's limits: a DNS label, a DNS subdomain. */
#define LABEL_MAX 63
#define SUBDOMAIN_MAX 253
/* At most this many bytes of a bad name are printed in a message. */
#define QUOTE_MAX 48

enum name_rule {
	RULE_SUBDOMAIN,	 /* DNS-1123 subdomain: most kinds */
	RULE_LABEL,	 /* DNS-1123 label: Namespace */
	RULE_LABEL_1035, /* DNS-1035 label: Service (starts with a letter) */
};

/*
 * What the API server holds each kind's metadata.name to, indexed by enum
 * ds_kind_id; a kind not listed (0) is a subdomain of at most 253. Service
 * names are DNS-1035 labels (ValidateServiceName; the RelaxedServiceNameValidation
 * gate of 1.34 that allows a leading digit is alpha and off by default). A
 * CronJob's name is a subdomain of at most 52: its Jobs add an 11-character
 * suffix and must still be 63 at most.
 */
static const struct {
	enum name_rule rule;
	size_t max;
} rules[DS_KIND_MAX] = {
    [DS_KIND_NAMESPACE] = {RULE_LABEL, LABEL_MAX},
    [DS_KIND_SERVICE] = {RULE_LABEL_1035, LABEL_MAX},
    [DS_KIND_CRON_JOB] = {RULE_SUBDOMAIN, 52},
};

static const char *const rule_text[] = {
    [RULE_SUBDOMAIN] = "a lowercase RFC 1123 subdomain (lower case alphanumerics, '-' or '.', "
		       "starting and ending with an alphanumeric)",
    [RULE_LABEL] = "a lowercase RFC 1123 label (lower case alphanumerics or '-', starting and "
		   "ending with an alphanumeric)",
    [RULE_LABEL_1035] = "a DNS-1035 label (lower case alphanumerics or '-', starting with a "
			"letter and ending with an alphanumeric)",
};

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n), n > 0. */
static bool is_label_run(const char *s, size_t n)
{
	if (!is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool ds_name_is_dns1123_label(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= LABEL_MAX && is_label_run(s, n);
}

bool ds_name_is_dns1035_label(const char *s)
{
	return ds_name_is_dns1123_label(s) && s[0] >= 'a' && s[0] <= 'z';
}

/* Labels joined by '.'; only the whole is bounded (253), as upstream bounds it. */
bool ds_name_is_dns1123_subdomain(const char *s)
{
	size_t n = s ? strlen(s) : 0, len;
	const char *p = s, *dot;

	if (n == 0 || n > SUBDOMAIN_MAX)
		return false;
	for (;;) {
		dot = strchr(p, '.');
		len = dot ? (size_t)(dot - p) : strlen(p);
		if (len == 0 || !is_label_run(p, len))
			return false;
		if (!dot)
			return true;
		p = dot + 1;
	}
}

/*
 * s in double quotes, cut to QUOTE_MAX bytes, with '"' and '\' escaped and
 * every byte outside printable ASCII written \n, \t or \xHH, so that a name
 * from the wire prints as one readable line whatever it holds.
 */
static const char *quote(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(s), o = 0, i;

	buf[o++] = '"';
	for (i = 0; i < n && i < QUOTE_MAX && o + 5 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c == '\n' || c == '\t') {
			buf[o++] = '\\';
			buf[o++] = c == '\n' ? 'n' : 't';
		} else if (c < 0x20 || c >= 0x7f) {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	if (i < n)
		snprintf(buf + o, size - o, "... (%zu characters)", n);
	return buf;
}

/* Why: "<what> <quoted name> <fmt...>". @return -EINVAL */
static int refuse(char *why, size_t size, const char *what, const char *name, const char *problem)
{
	char q[QUOTE_MAX * 4 + 40];

	if (why && size)
		snprintf(why, size, "%s %s %s", what, quote(name, q, sizeof(q)), problem);
	return -EINVAL;
}

static int check(const char *what, const char *name, enum name_rule rule, size_t max, char *why,
		 size_t size)
{
	char problem[256];
	size_t n;
	bool ok;

	if (!name || !name[0]) {
		if (why && size)
			snprintf(why, size, "%s is empty", what);
		return -EINVAL;
	}
	/* ValidatePathSegmentName: the name is a segment of the object's URL. */
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return refuse(why, size, what, name, "may not be '.' or '..' (a path segment)");
	if (strchr(name, '/'))
		return refuse(why, size, what, name, "may not contain '/'");
	if (strchr(name, '%'))
		return refuse(why, size, what, name, "may not contain '%'");
	n = strlen(name);
	if (n > max) {
		snprintf(problem, sizeof(problem), "must be no more than %zu characters", max);
		return refuse(why, size, what, name, problem);
	}
	if (rule == RULE_SUBDOMAIN)
		ok = ds_name_is_dns1123_subdomain(name);
	else if (rule == RULE_LABEL_1035)
		ok = ds_name_is_dns1035_label(name);
	else
		ok = ds_name_is_dns1123_label(name);
	if (!ok) {
		snprintf(problem, sizeof(problem), "must be %s", rule_text[rule]);
		return refuse(why, size, what, name, problem);
	}
	return 0;
}

int ds_name_check(const char *kind, const char *name, char *why, size_t size)
{
	const ds_kind *k = ds_kind_from_name(kind);
	enum name_rule rule = RULE_SUBDOMAIN;
	size_t max = SUBDOMAIN_MAX;
	char what[160];

	if (k && rules[k->id].max) {
		rule = rules[k->id].rule;
		max = rules[k->id].max;
	}
	snprintf(what, sizeof(what), "%s name", k ? k->name : "object");
	return check(what, name, rule, max, why, size);
}

int ds_name_check_namespace(const char *ns, char *why, size_t size)
{
	return check("namespace", ns, RULE_LABEL, LABEL_MAX, why, size);
}
