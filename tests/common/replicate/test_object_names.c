/* Names from the wire, held to the API server's rules before they reach a path or a log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kinds.h"
#include "drasync/object_names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A name of n copies of c (n < sizeof buf). */
static const char *repeat(char *buf, size_t n, char c)
{
	memset(buf, c, n);
	buf[n] = '\0';
	return buf;
}

static void test_object_names__labels_and_subdomains(void **state)
{
	char buf[400];

	(void)state;
	assert_true(ds_name_is_dns1123_label("a"));
	assert_true(ds_name_is_dns1123_label("web-1"));
	assert_true(ds_name_is_dns1123_label("1st"));
	assert_true(ds_name_is_dns1123_label(repeat(buf, 63, 'a')));
	assert_false(ds_name_is_dns1123_label(repeat(buf, 64, 'a')));
	assert_false(ds_name_is_dns1123_label(""));
	assert_false(ds_name_is_dns1123_label(NULL));
	assert_false(ds_name_is_dns1123_label("-web"));
	assert_false(ds_name_is_dns1123_label("web-"));
	assert_false(ds_name_is_dns1123_label("Web"));
	assert_false(ds_name_is_dns1123_label("a.b"));
	assert_false(ds_name_is_dns1123_label("a_b"));

	assert_true(ds_name_is_dns1035_label("web-1"));
	assert_false(ds_name_is_dns1035_label("1st"));

	assert_true(ds_name_is_dns1123_subdomain("gpu.example.com"));
	assert_true(ds_name_is_dns1123_subdomain("a"));
	assert_true(ds_name_is_dns1123_subdomain(repeat(buf, 253, 'a')));
	assert_false(ds_name_is_dns1123_subdomain(repeat(buf, 254, 'a')));
	/* upstream bounds only the whole: one label may be longer than 63 */
	assert_true(ds_name_is_dns1123_subdomain(repeat(buf, 100, 'a')));
	assert_false(ds_name_is_dns1123_subdomain("."));
	assert_false(ds_name_is_dns1123_subdomain(".."));
	assert_false(ds_name_is_dns1123_subdomain("a..b"));
	assert_false(ds_name_is_dns1123_subdomain(".a"));
	assert_false(ds_name_is_dns1123_subdomain("a."));
	assert_false(ds_name_is_dns1123_subdomain("a.-b"));
	assert_false(ds_name_is_dns1123_subdomain("a-.b"));
	assert_false(ds_name_is_dns1123_subdomain("a/b"));
	assert_false(ds_name_is_dns1123_subdomain("A.b"));
	assert_false(ds_name_is_dns1123_subdomain(""));
}

/* The path segments a tombstone could turn into another URL are refused by name, for every kind. */
static void test_object_names__path_segments_are_refused_for_every_kind(void **state)
{
	char why[512];

	(void)state;
	for (size_t i = 0; i < ds_kind_count(); i++) {
		const char *kind = ds_kind_at(i)->name;

		assert_int_equal(ds_name_check(kind, "..", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "\"..\" may not be '.' or '..'"));
		assert_non_null(strstr(why, kind));
		assert_int_equal(ds_name_check(kind, ".", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "\".\" may not be '.' or '..'"));
		assert_int_equal(ds_name_check(kind, "a/b", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "\"a/b\" may not contain '/'"));
		assert_int_equal(ds_name_check(kind, "50%", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "may not contain '%'"));
		assert_int_equal(ds_name_check(kind, "", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "is empty"));
		assert_int_equal(ds_name_check(kind, NULL, why, sizeof(why)), -EINVAL);
		assert_int_equal(ds_name_check(kind, "web", why, sizeof(why)), 0);
	}
	assert_int_equal(ds_name_check_namespace("..", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "namespace \"..\" may not be '.' or '..' (a path segment)");
	assert_int_equal(ds_name_check_namespace("hz-ok", why, sizeof(why)), 0);
}

/* Each kind's rule and length, as the API server's validation has them. */
static void test_object_names__each_kind_has_its_rule(void **state)
{
	static const struct {
		const char *kind;
		size_t max;	  /* longest name accepted */
		bool dots;	  /* a subdomain: "a.b" accepted */
		bool digit_first; /* "1a" accepted */
	} kinds[] = {
	    {"Namespace", 63, false, true},	 {"Service", 63, false, false},
	    {"LimitRange", 253, true, true},	 {"ResourceQuota", 253, true, true},
	    {"ServiceAccount", 253, true, true}, {"ConfigMap", 253, true, true},
	    {"Secret", 253, true, true},	 {"PersistentVolumeClaim", 253, true, true},
	    {"DeviceClass", 253, true, true},	 {"ResourceClaimTemplate", 253, true, true},
	    {"ResourceClaim", 253, true, true},	 {"Workload", 253, true, true},
	    {"PodGroup", 253, true, true},	 {"Deployment", 253, true, true},
	    {"ReplicaSet", 253, true, true},	 {"StatefulSet", 253, true, true},
	    {"DaemonSet", 253, true, true},	 {"Job", 253, true, true},
	    {"CronJob", 52, true, true},	 {"Pod", 253, true, true},
	    {"SomethingElse", 253, true, true}, /* not in the table: the subdomain rule */
	};
	char name[400], why[512], want[64];

	(void)state;
	assert_int_equal(sizeof(kinds) / sizeof(kinds[0]), ds_kind_count() + 1);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *kind = kinds[i].kind;

		assert_int_equal(
		    ds_name_check(kind, repeat(name, kinds[i].max, 'a'), why, sizeof(why)), 0);
		assert_int_equal(
		    ds_name_check(kind, repeat(name, kinds[i].max + 1, 'a'), why, sizeof(why)),
		    -EINVAL);
		snprintf(want, sizeof(want), "must be no more than %zu characters", kinds[i].max);
		assert_non_null(strstr(why, want));
		assert_int_equal(ds_name_check(kind, "a.b", why, sizeof(why)),
				 kinds[i].dots ? 0 : -EINVAL);
		assert_int_equal(ds_name_check(kind, "1a", why, sizeof(why)),
				 kinds[i].digit_first ? 0 : -EINVAL);
		assert_int_equal(ds_name_check(kind, "Web", why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "\"Web\" must be a"));
		assert_int_equal(ds_name_check(kind, "-web", why, sizeof(why)), -EINVAL);
		assert_int_equal(ds_name_check(kind, "web-", why, sizeof(why)), -EINVAL);
	}
	assert_int_equal(ds_name_check_namespace(repeat(name, 63, 'n'), why, sizeof(why)), 0);
	assert_int_equal(ds_name_check_namespace(repeat(name, 64, 'n'), why, sizeof(why)), -EINVAL);
	assert_int_equal(ds_name_check_namespace("hz.ok", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "RFC 1123 label"));
	assert_int_equal(ds_name_check("Service", "1web", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "DNS-1035 label"));
	/* an unknown kind from the wire is not printed as if the table named it */
	assert_int_equal(ds_name_check("Evil\nKind", "A", why, sizeof(why)), -EINVAL);
	assert_null(strchr(why, '\n'));
}

/* A bad name prints as one short readable line: quoted, escaped, cut with its length. */
static void test_object_names__messages_quote_escape_and_cut(void **state)
{
	char name[400], why[512];

	(void)state;
	memset(name, 'a', 300);
	name[300] = '\0';
	assert_int_equal(ds_name_check("ConfigMap", name, why, sizeof(why)), -EINVAL);
	assert_true(strlen(why) < 160);
	assert_non_null(strstr(why, "ConfigMap name \"aaaa"));
	assert_non_null(strstr(why, "\"... (300 characters) must be no more than 253 characters"));

	assert_int_equal(
	    ds_name_check("ConfigMap", "evil\nts=0 level=info event=apply", why, sizeof(why)),
	    -EINVAL);
	assert_null(strchr(why, '\n'));
	assert_non_null(strstr(why, "\"evil\\nts=0 level=info event=apply\" must be a lowercase"));

	assert_int_equal(ds_name_check("Pod", "a\"b\\c\x1b[31m\xc3\xa9", why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why,
			    "Pod name \"a\\\"b\\\\c\\x1b[31m\\xc3\\xa9\" must be a lowercase RFC "
			    "1123 subdomain (lower case alphanumerics, '-' or '.', starting "
			    "and ending with an alphanumeric)");

	/* a small buffer is cut, never overrun */
	assert_int_equal(ds_name_check("Pod", "..", why, 12), -EINVAL);
	assert_int_equal(strlen(why), 11);
	assert_int_equal(ds_name_check("Pod", "..", NULL, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_object_names__labels_and_subdomains),
	    cmocka_unit_test(test_object_names__path_segments_are_refused_for_every_kind),
	    cmocka_unit_test(test_object_names__each_kind_has_its_rule),
	    cmocka_unit_test(test_object_names__messages_quote_escape_and_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
