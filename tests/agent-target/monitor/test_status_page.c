/* status_page.h: what the page shows, every value escaped, nothing loaded
 * from anywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/status_page.h"
#include "dstest.h"

#include <stdlib.h>
#include <string.h>

/* The ledger structs hold char *: the test lends them literals it never frees. */
#define S(x) ((char *)(uintptr_t)(x))

static char *render(const ds_status_page *p)
{
	ds_str s;
	char *html;

	ds_str_init(&s, 1 << 20);
	assert_int_equal(ds_status_page_render(&s, p), 0);
	html = ds_str_take(&s, NULL);
	assert_non_null(html);
	return html;
}

static void test_status_page__shows_sources_namespaces_objects_verification(void **state)
{
	ds_ledger_source src = {.name = S("prod-east"),
				.cluster = S("east<b>"),
				.epoch = 3,
				.committed_seq = 120,
				.last_contact = 1700000000,
				.unapplied = 4,
				.oldest_unapplied = 1700000000 - 5,
				.objects = 42};
	ds_ledger_namespace ns[] = {
	    {.name = S("ml-team-dr"),
	     .recorded = true,
	     .mode = DS_MODE_MIGRATE,
	     .since = 1700000000,
	     .changed_by = S("failover"),
	     .objects = 10,
	     .held = 0},
	    {.name = S("other"), .recorded = false, .changed_by = S(""), .objects = 2, .held = 1},
	};
	ds_ledger_item item = {.source = S("prod-east"),
			       .kind = S("Deployment"),
			       .ns = S("ml-team-dr"),
			       .name = S("<script>alert(1)</script>"),
			       .state = DS_APPLY_FAILED,
			       .reason = S("admission webhook \"x\" denied & said <no>"),
			       .updated_at = 1700000000};
	ds_ledger_verification v = {.kind = S("Deployment"),
				    .ns = S("ml-team-dr"),
				    .name = S("gpu-app"),
				    .form = S("active"),
				    .reason = S("1/2 pods Running"),
				    .verified = false,
				    .checked_at = 1700000000,
				    .seconds = 300};
	ds_ledger_status st = {.namespaces = ns,
			       .n_namespaces = 2,
			       .sources = &src,
			       .n_sources = 1,
			       .items = &item,
			       .n_items = 1,
			       .more_items = 7,
			       .verifications = &v,
			       .n_verifications = 1,
			       .verified = 3,
			       .not_verified = 1,
			       .last_checked = 1700000000};
	ds_target_config *cfg = dt_config("mode: standby\n");
	ds_status_page p = {.config_path = "/etc/drasync/target.yaml",
			    .ledger_path = "/var/lib/drasync/ledger.db",
			    .listen = "tcp://0.0.0.0:7450",
			    .cfg = cfg,
			    .st = &st,
			    .inventory_error = "no ledger yet",
			    .ready = false,
			    .not_ready = "API server https://x: <timeout>",
			    .now = 1700000000 + 60};
	char *html;

	(void)state;
	st.states[DS_APPLY_APPLIED] = 40;
	st.states[DS_APPLY_FAILED] = 1;
	html = render(&p);
	assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
	/* sources with their lag (60 + 5 s waited) */
	assert_non_null(strstr(html, "<td>prod-east</td><td>east&lt;b&gt;</td>"));
	assert_non_null(strstr(html, "<td class=\"n\">4</td><td class=\"n\">65</td>"));
	/* namespaces: the ledger's mode, else the file's */
	assert_non_null(strstr(html, "<td>ml-team-dr</td><td>active</td>"));
	assert_non_null(strstr(html, "<td>other</td><td>standby</td>"));
	/* the failed object and its reason, escaped */
	assert_non_null(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_null(strstr(html, "<script"));
	assert_non_null(
	    strstr(html, "admission webhook &quot;x&quot; denied &amp; said &lt;no&gt;"));
	assert_non_null(strstr(html, "and 7 more"));
	/* verification */
	assert_non_null(strstr(html, "not verified"));
	assert_non_null(strstr(html, "1/2 pods Running"));
	/* not ready, and why */
	assert_non_null(strstr(html, "(API server https://x: &lt;timeout&gt;)"));
	assert_non_null(strstr(html, "no ledger yet"));
	/* self-contained: no external reference of any kind */
	assert_null(strstr(html, "http://"));
	assert_null(strstr(html, "https://x\""));
	assert_null(strstr(html, "<link"));
	assert_null(strstr(html, "<img"));
	assert_null(strstr(html, "src="));
	free(html);
	ds_target_config_free(cfg);
}

static void test_status_page__an_unreadable_ledger_says_why(void **state)
{
	ds_status_page p = {.ledger_error = "ledger.db: no such file",
			    .inventory_error = "ledger.db: no such file",
			    .ready = true,
			    .now = 1};
	char *html;

	(void)state;
	html = render(&p);
	assert_non_null(strstr(html, "The ledger cannot be read: ledger.db: no such file"));
	assert_non_null(strstr(html, "Ready: <span class=\"ok\">yes</span>"));
	free(html);
}

/* The inventory is cached: the page says when it was read, whether it was read or failed. */
static void test_status_page__says_when_the_inventory_was_read(void **state)
{
	ds_inventory inv = {0};
	ds_status_page p = {.inv = &inv, .inventory_built = 1700000000, .now = 1700000004};
	char *html;

	(void)state;
	html = render(&p);
	assert_non_null(strstr(html, "<h2 id=\"inventory\">Mapping inventory</h2>\n"
				     "<p id=\"inventory-built\">Read from the ledger "
				     "2023-11-14 22:13:20Z.</p>\n"));
	free(html);
	p.inv = NULL;
	p.inventory_error = "ledger.db: no such file";
	html = render(&p);
	assert_non_null(strstr(html, "Read from the ledger 2023-11-14 22:13:20Z."));
	assert_non_null(strstr(html, "<p class=\"bad\">ledger.db: no such file</p>"));
	free(html);
	p.inventory_built = 0; /* not said */
	html = render(&p);
	assert_null(strstr(html, "inventory-built"));
	free(html);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_page__shows_sources_namespaces_objects_verification),
	    cmocka_unit_test(test_status_page__an_unreadable_ledger_says_why),
	    cmocka_unit_test(test_status_page__says_when_the_inventory_was_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
