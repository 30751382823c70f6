/*
 * One event, one line: a name from the wire with a newline or quotes in it is
 * quoted (ds_log_quote) by every path the agents log it through, so it cannot
 * forge a second line (issue 22).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/export_log.h"
#include "drasync/log.h"
#include "drasync/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char EVIL[] = "core/ConfigMap/hz-ok/evil\nts=2026-12-03T00:00:00.000Z level=info "
			   "event=apply source=prod-east object=core/Secret/hz-ok/x state=applied";

/* What the calls between capture_begin() and capture_end() wrote to stderr. */
struct capture {
	FILE *f;
	int saved;
	char text[8192];
};

static void capture_begin(struct capture *c)
{
	c->f = tmpfile();
	assert_non_null(c->f);
	fflush(stderr);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->f), STDERR_FILENO) >= 0);
}

static const char *capture_end(struct capture *c)
{
	size_t n;

	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
	close(c->saved);
	rewind(c->f);
	n = fread(c->text, 1, sizeof(c->text) - 1, c->f);
	c->text[n] = '\0';
	fclose(c->f);
	return c->text;
}

static size_t lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_log__quote_escapes_a_newline(void **state)
{
	char buf[512];

	(void)state;
	assert_string_equal(ds_log_quote("a\nb", buf, sizeof(buf)), "\"a\\nb\"");
	assert_string_equal(ds_log_quote("a\rb\x1b", buf, sizeof(buf)), "\"a b \"");
	/* a valid name prints as it is: quoting changes nothing for it */
	assert_string_equal(ds_log_quote("core/ConfigMap/hz-ok/a", buf, sizeof(buf)),
			    "core/ConfigMap/hz-ok/a");
	assert_null(strchr(ds_log_quote(EVIL, buf, sizeof(buf)), '\n'));
}

/* The target's apply line, as on_apply writes it. */
static void test_log__an_apply_line_with_a_newline_name_is_one_line(void **state)
{
	struct capture c;
	char src[300], key[800], tgt[800], reason[600];
	const char *out;

	(void)state;
	capture_begin(&c);
	ds_log(DS_LOG_WARN, "apply", "source=%s object=%s target=%s seq=%llu state=%s reason=%s",
	       ds_log_quote("prod\neast", src, sizeof(src)), ds_log_quote(EVIL, key, sizeof(key)),
	       ds_log_quote("ConfigMap hz-ok/evil\n", tgt, sizeof(tgt)), 7ULL, "refused",
	       ds_log_quote("ConfigMap name \"evil\\n...\" must be a lowercase RFC 1123 subdomain",
			    reason, sizeof(reason)));
	out = capture_end(&c);
	assert_int_equal(lines(out), 1);
	assert_non_null(strstr(out, " event=apply source=\"prod\\neast\" object=\"core/ConfigMap/"
				    "hz-ok/evil\\nts=2026-12-03T00:00:00.000Z level=info "));
	assert_non_null(strstr(out, " target=\"ConfigMap hz-ok/evil\\n\" seq=7 state=refused "));
}

/* The link's events: the peer and the detail (with the names in it) are quoted. */
static void test_log__a_link_event_with_a_newline_name_is_one_line(void **state)
{
	ds_transport_event ev = {DS_LOG_WARN, "session_refused", "10.0.0.9:4100\nevent=x",
				 "source \"prod\neast\": protocol version 9 not supported"};
	char side[] = "receiver";
	struct capture c;
	const char *out;

	(void)state;
	capture_begin(&c);
	ds_transport_event_log(side, &ev);
	out = capture_end(&c);
	assert_int_equal(lines(out), 1);
	assert_non_null(strstr(out, "side=receiver peer=\"10.0.0.9:4100\\nevent=x\" detail="
				    "\"source \\\"prod\\neast\\\": protocol"));
}

/* The source's exporter events arrive formatted; the log writes them as one line. */
static void test_log__an_exporter_event_with_a_newline_name_is_one_line(void **state)
{
	char key[800], fields[1000];
	struct capture c;
	const char *out;

	(void)state;
	snprintf(fields, sizeof(fields), "object=%s seq=3 reason=x",
		 ds_log_quote(EVIL, key, sizeof(key)));
	capture_begin(&c);
	ds_export_log_event(NULL, &(ds_exporter_event){DS_LOG_WARN, "target_refused", fields});
	out = capture_end(&c);
	assert_int_equal(lines(out), 1);
	assert_non_null(strstr(out, "event=target_refused object=\"core/ConfigMap/hz-ok/evil\\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log__quote_escapes_a_newline),
	    cmocka_unit_test(test_log__an_apply_line_with_a_newline_name_is_one_line),
	    cmocka_unit_test(test_log__a_link_event_with_a_newline_name_is_one_line),
	    cmocka_unit_test(test_log__an_exporter_event_with_a_newline_name_is_one_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
