#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/yaml.h"
#include "testutil.h"
#include "tu_yaml.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_yaml__plain_scalars_typed_as_kubectl(void **state)
{
	(void)state;
	tu_yaml_assert_parses_to("[~, null, Null, NULL, '', ]", "[null,null,null,null,\"\"]");
	tu_yaml_assert_parses_to("a:\nb: ~\n", "{\"a\":null,\"b\":null}");
	tu_yaml_assert_parses_to("[true, True, TRUE, false, False, FALSE]",
				 "[true,true,true,false,false,false]");
	/* go-yaml v2 (sigs.k8s.io/yaml) still reads the YAML 1.1 booleans */
	tu_yaml_assert_parses_to(
	    "[yes, Yes, YES, y, Y, on, On, ON, no, No, NO, n, N, off, Off, OFF]",
	    "[true,true,true,true,true,true,true,true,"
	    "false,false,false,false,false,false,false,false]");
	tu_yaml_assert_parses_to("[tRUE, yEs, nO, oN, Yes!, nope]",
				 "[\"tRUE\",\"yEs\",\"nO\",\"oN\",\"Yes!\",\"nope\"]");
	tu_yaml_assert_parses_to(
	    "[0, 1, -1, +7, 0x1F, -0x1F, 0o17, 010, 0b101, 1_000, 9223372036854775807, "
	    "-9223372036854775808]",
	    "[0,1,-1,7,31,-31,15,8,5,1000,9223372036854775807,-9223372036854775808]");
	tu_yaml_assert_parses_to("[1.0, 1.5, -2.5e3, 1e3, .5, +.5, 1., 08, 1_000.5, 6.02e+23]",
				 "[1.0,1.5,-2500.0,1000.0,0.5,0.5,1.0,8.0,1000.5,6.02e23]");
	/* not numbers to go-yaml: they stay strings */
	tu_yaml_assert_parses_to(
	    "[0x, 0xG, 1e, 1e400, 1.2.3, 12abc, 0b, -, +, ., 1:20, 2001-12-14, "
	    "2001-12-14T21:59:43.10Z, 1.0.0, v1]",
	    "[\"0x\",\"0xG\",\"1e\",\"1e400\",\"1.2.3\",\"12abc\",\"0b\",\"-\",\"+\","
	    "\".\",\"1:20\",\"2001-12-14\",\"2001-12-14T21:59:43.10Z\",\"1.0.0\","
	    "\"v1\"]");
}

static void test_yaml__number_edge_cases_follow_go_yaml(void **state)
{
	(void)state;
	/* ints: Go's strconv.ParseInt(s with '_' removed, 0, 64) */
	tu_yaml_assert_parses_to("[-0b11, +0x10, 0X1F, 1__0, 0_1, 00, -0, 0B11, 0O17, -0o17]",
				 "[-3,16,31,10,1,0,0,3,15,-15]");
	/* floats: go-yaml's yamlStyleFloat, after ints failed */
	tu_yaml_assert_parses_to("[09.5, 1e+5, +1e5, 0.0, 1E3, 0019, 1_0.5]",
				 "[9.5,100000.0,100000.0,0.0,1000.0,19.0,10.5]");
	/* strings: not numbers to go-yaml */
	tu_yaml_assert_parses_to(
	    "[_1, 0x1.8p1, .infinity, Infinity, inf, nan, NaN, 1e5.5, ._5, 0o8, "
	    "0b2, +-1, 1-2]",
	    "[\"_1\",\"0x1.8p1\",\".infinity\",\"Infinity\",\"inf\",\"nan\",\"NaN\","
	    "\"1e5.5\",\"._5\",\"0o8\",\"0b2\",\"+-1\",\"1-2\"]");
	/* float keys are written as Go's FormatFloat(f, 'g', -1, 32) */
	tu_yaml_assert_parses_to(
	    "{0.1: a, 1e-5: b, 1.0e6: c, 123456.7: d, 2.50: e, -.inf: f}",
	    "{\"0.1\":\"a\",\"1e-05\":\"b\",\"1e+06\":\"c\",\"123456.7\":\"d\","
	    "\"2.5\":\"e\",\"-.inf\":\"f\"}");
}

static void test_yaml__big_integers_become_floats(void **state)
{
	json_t *v;

	(void)state;
	v = tu_yaml_parse1(
	    "[9223372036854775808, 18446744073709551615, 123456789012345678901234567890, "
	    "-9223372036854775809]");
	for (size_t i = 0; i < 4; i++)
		assert_true(json_is_real(json_array_get(v, i)));
	assert_true(json_real_value(json_array_get(v, 0)) == 9223372036854775808.0);
	assert_true(json_real_value(json_array_get(v, 1)) == 18446744073709551615.0);
	assert_true(json_real_value(json_array_get(v, 2)) > 1.2e29);
	assert_true(json_real_value(json_array_get(v, 3)) < -9.2e18);
	json_decref(v);
}

static void test_yaml__quoted_and_block_scalars_stay_strings(void **state)
{
	(void)state;
	tu_yaml_assert_parses_to("[\"1\", '2', \"true\", 'null', \"~\", '', \"0x1F\", \".inf\"]",
				 "[\"1\",\"2\",\"true\",\"null\",\"~\",\"\",\"0x1F\",\".inf\"]");
	tu_yaml_assert_parses_to("a: |\n  12\nb: >\n  true\n  false\nc: |-\n  x\n",
				 "{\"a\":\"12\\n\",\"b\":\"true false\\n\",\"c\":\"x\"}");
	tu_yaml_assert_parses_to("\"tab\\there \\u00e9 \\\\ \\\" \\/\"",
				 "\"tab\\there é \\\\ \\\" /\"");
}

static void test_yaml__nonfinite_floats_are_an_error(void **state)
{
	char buf[512];

	(void)state;
	assert_string_equal(
	    tu_yaml_parse_err("replicas: 1\nratio: .inf\n", -EBADMSG, buf, sizeof(buf)),
	    "t.yaml:2:8: .inf cannot be represented in JSON (quote it to keep it as a string)");
	assert_non_null(
	    strstr(tu_yaml_parse_err("- -.Inf\n", -EBADMSG, buf, sizeof(buf)), "t.yaml:1:3:"));
	assert_non_null(
	    strstr(tu_yaml_parse_err("x: .NaN\n", -EBADMSG, buf, sizeof(buf)), ".NaN cannot"));
	tu_yaml_assert_parses_to("x: '.inf'\n", "{\"x\":\".inf\"}");
}

static void test_yaml__tags(void **state)
{
	char buf[512];

	(void)state;
	tu_yaml_assert_parses_to(
	    "[!!str 123, !!str true, !!int \"42\", !!float 1, !!bool yes, !!null ~, "
	    "!!float '2.5', !custom 7, !!binary aGVsbG8=, !!timestamp 2001-12-14]",
	    "[\"123\",\"true\",42,1.0,true,null,2.5,\"7\",\"aGVsbG8=\","
	    "\"2001-12-14\"]");
	assert_string_equal(tu_yaml_parse_err("a:\n  b: !!int abc\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:6: cannot decode abc as !!int");
	assert_non_null(
	    strstr(tu_yaml_parse_err("- !!bool 1\n", -EBADMSG, buf, sizeof(buf)), "!!bool"));
}

static void test_yaml__nonstring_keys_become_strings(void **state)
{
	char buf[512];

	(void)state;
	tu_yaml_assert_parses_to(
	    "1: a\ntrue: b\n0x10: c\n1.5: d\nno: e\n1e6: f\n\"2\": g\n",
	    "{\"1\":\"a\",\"true\":\"b\",\"16\":\"c\",\"1.5\":\"d\",\"false\":\"e\","
	    "\"1e+06\":\"f\",\"2\":\"g\"}");
	assert_string_equal(tu_yaml_parse_err("a: 1\n~: 2\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:1: unsupported mapping key: null");
	assert_string_equal(tu_yaml_parse_err("? [a, b]\n: 1\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:1:3: unsupported mapping key: a sequence");
	assert_string_equal(tu_yaml_parse_err("a: 1\n\"b\\0c\": 2\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:1: mapping key contains a NUL character");
	/* go-yaml v2 reads the key y as the boolean true, so kubectl sees "true" */
	tu_yaml_assert_parses_to("y: 1\nx: 2\n", "{\"true\":1,\"x\":2}");
}

static void test_yaml__duplicate_key_is_an_error(void **state)
{
	char buf[512];

	(void)state;
	assert_string_equal(tu_yaml_parse_err("metadata:\n  name: a\n  labels: {}\n  name: b\n",
					      -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:4:3: duplicate key 'name'");
	/* 1 and "1" are the same key once keys are strings */
	assert_string_equal(tu_yaml_parse_err("{1: a, \"1\": b}", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:1:8: duplicate key '1'");
}

static void test_yaml__key_order_kept(void **state)
{
	json_t *v;
	const char *want[] = {"zeta", "alpha", "mid", "beta", "aa"};
	size_t i = 0;
	const char *k;
	json_t *x;

	(void)state;
	v = tu_yaml_parse1("zeta: 1\nalpha: 2\nmid: 3\nbeta: 4\naa: 5\n");
	json_object_foreach (v, k, x) {
		assert_true(i < 5);
		assert_string_equal(k, want[i]);
		assert_int_equal(json_integer_value(x), (long long)i + 1);
		i++;
	}
	assert_int_equal(i, 5);
	json_decref(v);
}

static void test_yaml__multi_document_stream(void **state)
{
	json_t *docs;

	(void)state;
	docs = tu_yaml_parse_ok(
	    "# only a comment\n---\n---\na: 1\n---\n# nothing\n---\n- 2\n--- null\n---\n"
	    "b: 3\n...\n");
	tu_assert_json(docs, "[{\"a\":1},[2],{\"b\":3}]");
	json_decref(docs);
	docs = tu_yaml_parse_ok("");
	tu_assert_json(docs, "[]");
	json_decref(docs);
	docs = tu_yaml_parse_ok("# just comments\n\n");
	tu_assert_json(docs, "[]");
	json_decref(docs);
}

static void test_yaml__json_input(void **state)
{
	(void)state;
	tu_yaml_assert_parses_to("{\"a\": 1}", "{\"a\":1}");
	tu_yaml_assert_parses_to("{\"a\":1,\"b\":[true,false,null,1.5,-2,\"x\"]}",
				 "{\"a\":1,\"b\":[true,false,null,1.5,-2,\"x\"]}");
	tu_yaml_assert_parses_to("[{\"name\": \"a\"}, {\"name\": \"b\", \"n\": 2e2}]",
				 "[{\"name\":\"a\"},{\"name\":\"b\",\"n\":200.0}]");
	tu_yaml_assert_parses_to(
	    "{\n\t\"apiVersion\": \"v1\",\n\t\"items\": [\n\t\t{\"kind\": \"Pod\", "
	    "\"metadata\": {\"name\": \"p\", \"labels\": {\"app\": \"x\"}}}\n\t],\n\t"
	    "\"kind\": \"List\",\n\t\"metadata\": {\"resourceVersion\": \"\"}\n}\n",
	    "{\"apiVersion\":\"v1\",\"items\":[{\"kind\":\"Pod\",\"metadata\":{"
	    "\"name\":\"p\",\"labels\":{\"app\":\"x\"}}}],\"kind\":\"List\","
	    "\"metadata\":{\"resourceVersion\":\"\"}}");
}

static void test_yaml__anchors_aliases_and_merge(void **state)
{
	json_t *v;

	(void)state;
	tu_yaml_assert_parses_to("base: &b {x: 1, z: [1, 2]}\ncopy: *b\n",
				 "{\"base\":{\"x\":1,\"z\":[1,2]},\"copy\":{\"x\":1,\"z\":[1,2]}}");
	/* merge keys: explicit keys win, earlier sources win over later ones */
	tu_yaml_assert_parses_to("a: &a {x: 1, w: 2}\nb: &b {w: 3, z: 4}\n"
				 "c:\n  <<: [*a, *b]\n  x: 9\n",
				 "{\"a\":{\"x\":1,\"w\":2},\"b\":{\"w\":3,\"z\":4},"
				 "\"c\":{\"x\":9,\"w\":2,\"z\":4}}");
	tu_yaml_assert_parses_to("d:\n  x: 0\n  <<: {x: 1, w: 2}\n", "{\"d\":{\"x\":0,\"w\":2}}");
	tu_yaml_assert_parses_to("\"<<\": 1\n", "{\"<<\":1}");
	/* an anchor on a key can be used as a key or a value */
	tu_yaml_assert_parses_to(
	    "&k name: x\nlist: [*k]\nother:\n  *k : again\n",
	    "{\"name\":\"x\",\"list\":[\"name\"],\"other\":{\"name\":\"again\"}}");
	/* aliases are copies: changing one does not change the other */
	v = tu_yaml_parse1("a: &x {k: 1}\nb: *x\n");
	json_object_set_new(json_object_get(v, "b"), "k", json_integer(2));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "a"), "k")), 1);
	json_decref(v);
}

static void test_yaml__alias_errors_and_bomb(void **state)
{
	char buf[512];
	const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
			   "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
			   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
			   "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
			   "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
			   "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
			   "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";

	(void)state;
	assert_string_equal(tu_yaml_parse_err("a: *nope\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:1:4: unknown anchor 'nope'");
	assert_string_equal(tu_yaml_parse_err("a: &x [1, *x]\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:1:11: alias '*x' refers to a node that contains it");
	assert_non_null(strstr(tu_yaml_parse_err(bomb, -EBADMSG, buf, sizeof(buf)),
			       "aliases expand to more than 100000 nodes"));
}

static void test_yaml__syntax_errors_are_located(void **state)
{
	char buf[512];

	(void)state;
	/* a tab used for indentation */
	assert_string_equal(
	    tu_yaml_parse_err("a:\n\tb: 1\n", -EBADMSG, buf, sizeof(buf)),
	    "t.yaml:2:1: found a tab character that cannot start any token (YAML is indented "
	    "with spaces, not tabs)");
	assert_string_equal(tu_yaml_parse_err("a: [1, 2\nb: 3\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:2: while parsing a flow sequence did not find expected ',' "
			    "or ']'");
	assert_string_equal(tu_yaml_parse_err("a: 'open\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:1: while scanning a quoted scalar found unexpected end of "
			    "stream");
	assert_string_equal(tu_yaml_parse_err("ok: 1\nbad: \xff\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:6: invalid leading UTF-8 octet (#FF)");
}

static void test_yaml__depth_and_size_bounded(void **state)
{
	char buf[512];
	char *deep = malloc(2 * 300 + 1);
	json_t *docs = NULL;
	ds_err err = {0};

	(void)state;
	for (int i = 0; i < 300; i++) {
		deep[i] = '[';
		deep[300 + i] = ']';
	}
	deep[600] = '\0';
	assert_string_equal(tu_yaml_parse_err(deep, -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:1:257: nesting deeper than 256 levels");
	free(deep);
	assert_int_equal(
	    ds_yaml_parse("a: 1", (size_t)DS_YAML_MAX_INPUT + 1, "big.yaml", 0, &docs, NULL, &err),
	    -E2BIG);
	assert_null(docs);
	assert_non_null(strstr(err.msg, "input larger than"));
}

static void test_yaml__locations(void **state)
{
	const char *text = "# config\n"
			   "mode: active\n"
			   "dra:\n"
			   "  resourceClaimMappings:\n"
			   "  - objectType: ResourceClaim\n"
			   "    to: {name: gpu}\n"
			   "  \"a/b~c\": 1\n"
			   "---\n"
			   "second: [x, y]\n";
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	ds_yaml_loc l;
	ds_err err = {0};

	(void)state;
	assert_int_equal(
	    ds_yaml_parse(text, strlen(text), "cfg.yaml", DS_YAML_LOCATIONS, &docs, &locs, &err),
	    0);
	assert_non_null(locs);
	assert_string_equal(ds_yaml_locs_file(locs), "cfg.yaml");
	assert_int_equal(ds_yaml_locs_find(locs, 0, "", &l), 0);
	assert_int_equal(l.line, 2);
	assert_int_equal(l.col, 1);
	assert_int_equal(l.key_line, 0);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/mode", &l), 0);
	assert_int_equal(l.line, 2);
	assert_int_equal(l.col, 7);
	assert_int_equal(l.key_line, 2);
	assert_int_equal(l.key_col, 1);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/dra/resourceClaimMappings/0/objectType", &l),
			 0);
	assert_int_equal(l.line, 5);
	assert_int_equal(l.col, 17);
	assert_int_equal(l.key_line, 5);
	assert_int_equal(l.key_col, 5);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/dra/resourceClaimMappings/0", &l), 0);
	assert_int_equal(l.line, 5);
	assert_int_equal(l.col, 5);
	assert_int_equal(l.key_line, 0);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/dra/resourceClaimMappings/0/to/name", &l), 0);
	assert_int_equal(l.line, 6);
	assert_int_equal(l.col, 16);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/dra/a~1b~0c", &l), 0);
	assert_int_equal(l.line, 7);
	assert_int_equal(l.col, 12);
	assert_int_equal(l.key_col, 3);
	assert_int_equal(ds_yaml_locs_find(locs, 1, "/second/1", &l), 0);
	assert_int_equal(l.line, 9);
	assert_int_equal(l.col, 13);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/second", &l), -ENOENT);
	assert_int_equal(ds_yaml_locs_find(locs, 2, "", &l), -ENOENT);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/dra/nope", &l), -ENOENT);
	ds_yaml_locs_free(locs);
	json_decref(docs);
}

static void test_yaml__emit_block_style(void **state)
{
	json_t *v = json_pack("{s:s, s:{s:s, s:{}}, s:[{s:s, s:i}, {s:[]}], s:f, s:b, s:n}",
			      "apiVersion", "v1", "metadata", "name", "p", "labels", "spec", "name",
			      "c", "n", 3, "x", "ratio", 1.0, "on", 1, "none");
	char *y;

	(void)state;
	y = tu_yaml_emit(v);
	assert_string_equal(y, "apiVersion: v1\n"
			       "metadata:\n"
			       "  name: p\n"
			       "  labels: {}\n"
			       "spec:\n"
			       "- name: c\n"
			       "  'n': 3\n"
			       "- x: []\n"
			       "ratio: 1.0\n"
			       "'on': true\n"
			       "none: null\n");
	free(y);
	tu_yaml_assert_round_trip(v);
	json_decref(v);
}

static void test_yaml__emit_quotes_ambiguous_strings(void **state)
{
	const char *tricky[] = {
	    "true",
	    "false",
	    "True",
	    "yes",
	    "no",
	    "on",
	    "off",
	    "y",
	    "N",
	    "null",
	    "Null",
	    "~",
	    "",
	    "1",
	    "-1",
	    "+1",
	    "1.0",
	    "1.",
	    ".5",
	    "1e3",
	    "0x1F",
	    "0o17",
	    "010",
	    "08",
	    "1_000",
	    ".inf",
	    "-.inf",
	    ".nan",
	    ".NaN",
	    "<<",
	    "=",
	    "1:20",
	    "2001-12-14",
	    " lead",
	    "trail ",
	    "a: b",
	    "a #b",
	    "- x",
	    "-",
	    "? x",
	    "?",
	    ":",
	    ": x",
	    ",",
	    "[x",
	    "]",
	    "{",
	    "}",
	    "#c",
	    "&a",
	    "*a",
	    "!t",
	    "|",
	    ">",
	    "'",
	    "\"",
	    "%p",
	    "@x",
	    "`x",
	    "a\nb",
	    "a\nb\n",
	    "a\n\n",
	    "\n",
	    "  indented\nmore",
	    "trailing space \nx",
	    "tab\there",
	    "\ttab",
	    "\x01 ctl",
	    "é ü ✓",
	    "\xe2\x80\xa8 ls",
	    "a'b",
	    "a\"b",
	    "a\\b",
	    "123456789012345678901",
	    "9223372036854775808",
	    "- - x",
	    "---",
	    "...",
	    "--- x",
	    "a\r\nb",
	    "key:",
	    "0",
	    "-0",
	    "0.0",
	    "+.5",
	    "1e",
	    "v1.2",
	    "0b101",
	    "YES",
	    "OFF",
	    "NULL",
	};
	json_t *arr = json_array();
	json_t *obj = json_object();

	(void)state;
	for (size_t i = 0; i < sizeof(tricky) / sizeof(*tricky); i++) {
		size_t len = strlen(tricky[i]);
		json_t *s = json_stringn(tricky[i], len);

		assert_non_null(s);
		json_array_append(arr, s);
		json_object_setn(obj, tricky[i], len, s);
		tu_yaml_assert_round_trip(s);
		{
			json_t *one = json_object();

			json_object_setn(one, tricky[i], len, s);
			tu_yaml_assert_round_trip(one);
			json_decref(one);
		}
		json_decref(s);
	}
	/* a NUL inside a string survives as an escape */
	json_array_append_new(arr, json_stringn("nul\0x", 5));
	json_object_set_new(obj, "nul", json_stringn("nul\0x", 5));
	tu_yaml_assert_round_trip(arr);
	tu_yaml_assert_round_trip(obj);
	json_decref(arr);
	json_decref(obj);
}

static void test_yaml__emit_numbers_keep_their_type(void **state)
{
	json_t *v =
	    json_pack("[f, f, f, f, f, f, I, I, I]", 1.0, 0.1, -2.5, 1e20, 1e-7, 123456789.0,
		      (json_int_t)0, (json_int_t)INT64_MAX, (json_int_t)INT64_MIN);
	char *y;

	(void)state;
	y = tu_yaml_emit(v);
	assert_string_equal(y, "- 1.0\n- 0.1\n- -2.5\n- 1e+20\n- 1e-07\n- 123456789.0\n- 0\n"
			       "- 9223372036854775807\n- -9223372036854775808\n");
	free(y);
	tu_yaml_assert_round_trip(v);
	json_decref(v);
}

static void test_yaml__emit_multiline_as_literal(void **state)
{
	json_t *v = json_pack("{s:s, s:s}", "script", "echo hi\nexit 0\n", "x", "a\nb");
	char *y = tu_yaml_emit(v);

	(void)state;
	assert_string_equal(y, "script: |\n  echo hi\n  exit 0\nx: |-\n  a\n  b\n");
	free(y);
	tu_yaml_assert_round_trip(v);
	json_decref(v);
}

/* Every fixture manifest: parse -> emit -> parse gives the same documents. */
static void test_yaml__fixtures_round_trip(void **state)
{
	const char *dirs[] = {"dra-example-driver/v1", "dra-example-driver/v1beta1"};
	size_t files = 0;

	(void)state;
	for (size_t d = 0; d < 2; d++) {
		const char *dir = tu_fixture(dirs[d]);
		DIR *dh = tu_opendir(dir);
		struct dirent *de;

		while ((de = readdir(dh)) != NULL) {
			char path[1024];
			char *text;
			size_t len;
			json_t *docs = NULL;
			ds_err err = {0};
			char eb[512];

			if (!strstr(de->d_name, ".yaml"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			text = tu_read_file(path, &len);
			if (ds_yaml_parse(text, len, path, 0, &docs, NULL, &err))
				fail_msg("%s", ds_err_format(&err, eb, sizeof(eb)));
			assert_true(json_array_size(docs) >= 1);
			for (size_t i = 0; i < json_array_size(docs); i++) {
				json_t *doc = json_array_get(docs, i);

				assert_true(json_is_object(doc));
				assert_true(json_is_string(json_object_get(doc, "kind")));
				tu_yaml_assert_round_trip(doc);
			}
			json_decref(docs);
			free(text);
			files++;
		}
		closedir(dh);
	}
	assert_true(files >= 14);
}

static void test_yaml__json_streams_read_as_json(void **state)
{
	char buf[512];
	json_t *docs;
	ds_yaml_locs *locs = NULL;
	ds_yaml_loc l;
	ds_err err = {0};
	const char *pair = "{\"smile\": \"\\ud83d\\ude00\", \"lt\": \"\\u003c\"}";

	(void)state;
	/* surrogate pairs are JSON (kubectl reads a '{' stream with a JSON decoder) */
	tu_yaml_assert_parses_to(pair, "{\"smile\":\"😀\",\"lt\":\"<\"}");
	/* concatenated JSON texts, as kubectl's JSON stream decoder accepts */
	docs = tu_yaml_parse_ok("{\"a\": 1}\n{\"b\": [2]}\n");
	tu_assert_json(docs, "[{\"a\":1},{\"b\":[2]}]");
	json_decref(docs);
	/* no space after ':' and JSON numbers */
	tu_yaml_assert_parses_to("{\"a\":1,\"b\":-2.5e-1,\"c\":12345678901234567890}",
				 "{\"a\":1,\"b\":-0.25,\"c\":1.2345678901234567e19}");
	/* JSON errors are reported by the YAML reader, with a location */
	assert_string_equal(tu_yaml_parse_err("{\"a\": 1,\n \"a\": 2}", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:2: duplicate key 'a'");
	assert_non_null(strstr(tu_yaml_parse_err("{\"a\": [1, 2}", -EBADMSG, buf, sizeof(buf)),
			       "t.yaml:1:12: "));
	/* positions are still available for JSON input */
	assert_int_equal(
	    ds_yaml_parse(pair, strlen(pair), "p.json", DS_YAML_LOCATIONS, &docs, &locs, &err), 0);
	tu_assert_json(docs, "[{\"smile\":\"😀\",\"lt\":\"<\"}]");
	json_decref(docs);
	ds_yaml_locs_free(locs);
	locs = NULL;
	assert_int_equal(
	    ds_yaml_parse("{\"x\": [1, 2]}", 13, "p.json", DS_YAML_LOCATIONS, &docs, &locs, &err),
	    0);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/x/1", &l), 0);
	assert_int_equal(l.line, 1);
	assert_int_equal(l.col, 11);
	ds_yaml_locs_free(locs);
	json_decref(docs);
}

static void test_yaml__locations_through_aliases_and_merges(void **state)
{
	const char *text = "base: &b\n"
			   "  image: x\n"
			   "  ports: [1, 2]\n"
			   "one:\n"
			   "  <<: *b\n"
			   "  name: web\n"
			   "  image: nginx\n"
			   "two: *b\n";
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	ds_yaml_loc l;
	ds_err err = {0};

	(void)state;
	assert_int_equal(
	    ds_yaml_parse(text, strlen(text), "m.yaml", DS_YAML_LOCATIONS, &docs, &locs, &err), 0);
	tu_assert_json(
	    docs, "[{\"base\":{\"image\":\"x\",\"ports\":[1,2]},\"one\":{\"image\":\"nginx\","
		  "\"ports\":[1,2],\"name\":\"web\"},\"two\":{\"image\":\"x\",\"ports\":[1,2]}}]");
	/* merged keys point at the anchored text; explicit keys at their own */
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/one/ports/1", &l), 0);
	assert_int_equal(l.line, 3);
	assert_int_equal(l.col, 14);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/one/image", &l), 0);
	assert_int_equal(l.line, 7);
	assert_int_equal(l.col, 10);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/one/name", &l), 0);
	assert_int_equal(l.line, 6);
	/* the alias node itself is where "*b" is written; its insides where they are written */
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/two", &l), 0);
	assert_int_equal(l.line, 8);
	assert_int_equal(l.col, 6);
	assert_int_equal(l.key_line, 8);
	assert_int_equal(l.key_col, 1);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/two/image", &l), 0);
	assert_int_equal(l.line, 2);
	assert_int_equal(l.col, 10);
	assert_int_equal(l.key_line, 2);
	assert_int_equal(l.key_col, 3);
	/* "/<<" is where the merge value is written */
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/one/<<", &l), 0);
	assert_int_equal(l.line, 5);
	assert_int_equal(l.col, 7);
	assert_int_equal(ds_yaml_locs_find(locs, 0, "/one/nope", &l), -ENOENT);
	ds_yaml_locs_free(locs);
	json_decref(docs);
}

static void test_yaml__merge_key_errors(void **state)
{
	char buf[512];

	(void)state;
	assert_string_equal(tu_yaml_parse_err("a:\n  <<: 1\n", -EBADMSG, buf, sizeof(buf)),
			    "t.yaml:2:3: merge key '<<' needs a mapping or a list of mappings");
	assert_string_equal(
	    tu_yaml_parse_err("a: &x [1]\nb:\n  <<: [*x]\n", -EBADMSG, buf, sizeof(buf)),
	    "t.yaml:3:3: merge key '<<' needs a mapping or a list of mappings");
	assert_string_equal(
	    tu_yaml_parse_err("a:\n  k: 1\n  k: 2\n  <<: {j: 1}\n", -EBADMSG, buf, sizeof(buf)),
	    "t.yaml:3:3: duplicate key 'k'");
}

static void test_yaml__crlf_bom_and_comments(void **state)
{
	(void)state;
	tu_yaml_assert_parses_to(
	    "\xef\xbb\xbf# c\r\napiVersion: v1 # trailing\r\nkind: Pod\r\nx: |\r\n  a\r\n",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"x\":\"a\\n\"}");
	tu_yaml_assert_parses_to("a: b#not-a-comment\nc: 'it''s'\nd: \"x\\ny\"\n",
				 "{\"a\":\"b#not-a-comment\",\"c\":\"it's\",\"d\":\"x\\ny\"}");
}

static void test_yaml__parse_file(void **state)
{
	char *dir = tu_mkdtemp("yaml");
	char path[1024];
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	ds_err err = {0};
	char buf[1200];

	(void)state;
	snprintf(path, sizeof(path), "%s/m.yaml", dir);
	tu_write_file(path, "a: 1\n---\nb: [2, 3]\n");
	assert_int_equal(ds_yaml_parse_file(path, DS_YAML_LOCATIONS, &docs, &locs, &err), 0);
	tu_assert_json(docs, "[{\"a\":1},{\"b\":[2,3]}]");
	assert_string_equal(ds_yaml_locs_file(locs), path);
	json_decref(docs);
	ds_yaml_locs_free(locs);
	docs = NULL;
	tu_write_file(path, "a: 1\nb: [2\n");
	assert_int_equal(ds_yaml_parse_file(path, 0, &docs, NULL, &err), -EBADMSG);
	assert_null(docs);
	assert_string_equal(err.file, path);
	assert_int_equal(err.line, 3);
	snprintf(path, sizeof(path), "%s/missing.yaml", dir);
	assert_int_equal(ds_yaml_parse_file(path, 0, &docs, NULL, &err), -ENOENT);
	snprintf(buf, sizeof(buf), "%s: cannot open: No such file or directory", path);
	{
		char eb[1400];

		assert_string_equal(ds_err_format(&err, eb, sizeof(eb)), buf);
	}
	free(dir);
}

static void test_yaml__emit_to_file_and_scalars(void **state)
{
	FILE *f = tmpfile();
	char text[256] = {0};
	json_t *v = json_pack("{s:[s,i]}", "k", "yes", 1);
	json_t *deep = json_array();
	json_t *cur = deep;
	char *s;
	ds_err err = {0};

	(void)state;
	assert_non_null(f);
	assert_int_equal(ds_yaml_emit(f, v, NULL), 0);
	rewind(f);
	assert_true(fread(text, 1, sizeof(text) - 1, f) > 0);
	assert_string_equal(text, "k:\n- 'yes'\n- 1\n");
	fclose(f);
	json_decref(v);
	v = json_string("true");
	s = tu_yaml_emit(v);
	assert_string_equal(s, "'true'\n");
	free(s);
	json_decref(v);
	v = json_integer(7);
	s = tu_yaml_emit(v);
	assert_string_equal(s, "7\n");
	free(s);
	json_decref(v);
	/* too deep to write */
	for (int i = 0; i < DS_YAML_MAX_DEPTH + 5; i++) {
		json_t *n = json_array();

		json_array_append_new(cur, n);
		cur = n;
	}
	assert_int_equal(ds_yaml_emit_string(deep, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "deeper than 256"));
	json_decref(deep);
}

/* A tiny deterministic generator, so failures reproduce. */
static uint32_t rnd_state = 2463534242u;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

/* Parse must succeed or fail cleanly; whatever parses must survive emit -> parse. */
static void check_input(const char *buf, size_t len, unsigned flags)
{
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	ds_err err = {0};
	int rc = ds_yaml_parse(buf, len, "fuzz.yaml", flags, &docs, &locs, &err);

	if (rc != 0) {
		if (rc != -EBADMSG)
			fail_msg("unexpected rc %d (%s)", rc, err.msg);
		assert_null(docs);
		assert_true(err.msg[0] != '\0');
		assert_string_equal(err.file, "fuzz.yaml");
		assert_true(err.line >= 1);
		assert_true(err.col >= 1);
		return;
	}
	assert_true(json_is_array(docs));
	if (flags & DS_YAML_LOCATIONS) {
		ds_yaml_loc l;

		for (size_t i = 0; i < json_array_size(docs); i++)
			if (ds_yaml_locs_find(locs, i, "", &l) == 0)
				assert_true(l.line >= 1 && l.col >= 1);
	}
	for (size_t i = 0; i < json_array_size(docs); i++)
		tu_yaml_assert_round_trip(json_array_get(docs, i));
	json_decref(docs);
	ds_yaml_locs_free(locs);
}

static void test_yaml__truncated_garbage_and_random_input(void **state)
{
	static const char *const extra[] = {
	    "a: &x {k: [1, 2, {z: ~}]}\nb: *x\nc:\n  <<: [*x, {m: 1}]\n  n: |\n    text\n",
	    "{\"apiVersion\": \"v1\", \"items\": [{\"kind\": \"Pod\", \"n\": 1.5e3}], "
	    "\"kind\": \"List\"}",
	    "- !!str 1\n- !!int 0x10\n- 'q''s'\n- \"e\\t\\u00e9\"\n- >-\n  folded\n  text\n",
	    "%YAML 1.1\n---\n? complex\n: value\n...\n--- [1, {a: b}]\n",
	};
	const char *dirs[] = {"dra-example-driver/v1", "dra-example-driver/v1beta1"};
	const char alphabet[] = "-:[]{}#&*!|>'\"%@`,? \n\t\\ab01.~<x";
	char *corpus[64];
	size_t lens[64], n = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(extra) / sizeof(*extra); i++) {
		corpus[n] = strdup(extra[i]);
		lens[n++] = strlen(extra[i]);
	}
	for (size_t d = 0; d < 2; d++) {
		const char *dir = tu_fixture(dirs[d]);
		DIR *dh = tu_opendir(dir);
		struct dirent *de;

		while ((de = readdir(dh)) != NULL && n < 64) {
			char path[1024];

			if (!strstr(de->d_name, ".yaml"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			corpus[n] = tu_read_file(path, &lens[n]);
			n++;
		}
		closedir(dh);
	}
	/* every prefix, alternating the locations flag */
	for (size_t i = 0; i < n; i++)
		for (size_t len = 0; len <= lens[i]; len++)
			check_input(corpus[i], len, len % 2 ? DS_YAML_LOCATIONS : 0);
	/* mutations: overwrite, insert or delete a few bytes */
	for (int round = 0; round < 3000; round++) {
		size_t i = rnd() % n;
		size_t len = lens[i];
		char *m = malloc(len + 8);

		memcpy(m, corpus[i], len);
		for (int k = 0; k < 1 + (int)(rnd() % 3); k++) {
			size_t pos = len ? rnd() % len : 0;
			char c = rnd() % 2 ? alphabet[rnd() % (sizeof(alphabet) - 1)] : (char)rnd();

			switch (rnd() % 3) {
			case 0:
				if (len)
					m[pos] = c;
				break;
			case 1:
				memmove(m + pos + 1, m + pos, len - pos);
				m[pos] = c;
				len++;
				break;
			default:
				if (len) {
					memmove(m + pos, m + pos + 1, len - pos - 1);
					len--;
				}
			}
		}
		check_input(m, len, round % 2 ? DS_YAML_LOCATIONS : 0);
		free(m);
	}
	/* random bytes, and random YAML-ish text */
	for (int round = 0; round < 3000; round++) {
		char b[300];
		size_t len = rnd() % sizeof(b);

		for (size_t k = 0; k < len; k++)
			b[k] = round % 2 ? (char)rnd() : alphabet[rnd() % (sizeof(alphabet) - 1)];
		check_input(b, len, round % 4 < 2 ? DS_YAML_LOCATIONS : 0);
	}
	for (size_t i = 0; i < n; i++)
		free(corpus[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_yaml__plain_scalars_typed_as_kubectl),
	    cmocka_unit_test(test_yaml__number_edge_cases_follow_go_yaml),
	    cmocka_unit_test(test_yaml__big_integers_become_floats),
	    cmocka_unit_test(test_yaml__quoted_and_block_scalars_stay_strings),
	    cmocka_unit_test(test_yaml__nonfinite_floats_are_an_error),
	    cmocka_unit_test(test_yaml__tags),
	    cmocka_unit_test(test_yaml__nonstring_keys_become_strings),
	    cmocka_unit_test(test_yaml__duplicate_key_is_an_error),
	    cmocka_unit_test(test_yaml__key_order_kept),
	    cmocka_unit_test(test_yaml__multi_document_stream),
	    cmocka_unit_test(test_yaml__json_input),
	    cmocka_unit_test(test_yaml__anchors_aliases_and_merge),
	    cmocka_unit_test(test_yaml__alias_errors_and_bomb),
	    cmocka_unit_test(test_yaml__syntax_errors_are_located),
	    cmocka_unit_test(test_yaml__depth_and_size_bounded),
	    cmocka_unit_test(test_yaml__locations),
	    cmocka_unit_test(test_yaml__emit_block_style),
	    cmocka_unit_test(test_yaml__emit_quotes_ambiguous_strings),
	    cmocka_unit_test(test_yaml__emit_numbers_keep_their_type),
	    cmocka_unit_test(test_yaml__emit_multiline_as_literal),
	    cmocka_unit_test(test_yaml__fixtures_round_trip),
	    cmocka_unit_test(test_yaml__json_streams_read_as_json),
	    cmocka_unit_test(test_yaml__locations_through_aliases_and_merges),
	    cmocka_unit_test(test_yaml__merge_key_errors),
	    cmocka_unit_test(test_yaml__crlf_bom_and_comments),
	    cmocka_unit_test(test_yaml__parse_file),
	    cmocka_unit_test(test_yaml__emit_to_file_and_scalars),
	    cmocka_unit_test(test_yaml__truncated_garbage_and_random_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
