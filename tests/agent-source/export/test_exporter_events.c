/* The exporter tells through its on_event callback, never by logging itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/exporter.h"
#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_httpd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	int n;
	enum ds_log_level level;
	char name[64], fields[256];
};

static void on_event(void *ud, const ds_exporter_event *ev)
{
	struct seen *s = ud;

	s->n++;
	s->level = ev->level;
	snprintf(s->name, sizeof(s->name), "%s", ev->name);
	snprintf(s->fields, sizeof(s->fields), "%s", ev->fields);
}

static bool any_namespace(void *ud, const json_t *ns)
{
	(void)ud;
	(void)ns;
	return true;
}

static int open_exporter(struct seen *seen)
{
	struct tu_httpd h;
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_exporter *ex = NULL;
	ds_exporter_config cfg;
	ds_err err = {0};
	char *dir = tu_mkdtemp("exporter-events"), *kcpath;
	int rc;

	tu_httpd_start(&h);
	kcpath = tu_httpd_kubeconfig(&h, dir, "tok");
	ds_kube_transport_opts_init(&o);
	assert_int_equal(ds_kubeconfig_load(&kc, kcpath, NULL, &err), 0);
	assert_int_equal(ds_kube_new(&k, &kc, &o, &err), 0);
	ds_exporter_config_default(&cfg);
	cfg.kube = k;
	cfg.state_dir = dir;
	cfg.ns_match = any_namespace;
	cfg.on_event = on_event;
	cfg.event_ud = seen;
	/* opening reports how the namespaces are read, without asking the cluster */
	rc = ds_exporter_new(&ex, &cfg, &err);
	ds_exporter_free(ex);
	ds_kube_free(k);
	tu_httpd_stop(&h);
	free(kcpath);
	free(dir);
	return rc;
}

static void test_exporter_events__reported_through_the_callback(void **state)
{
	struct seen seen = {0};

	(void)state;
	assert_int_equal(open_exporter(&seen), 0);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.level, DS_LOG_INFO);
	assert_string_equal(seen.name, "namespace_reads");
	assert_non_null(strstr(seen.fields, "scope=cluster reason=namespaceSelector watches_max="));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exporter_events__reported_through_the_callback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
