/* The exporter tells through its on_event callback, never by logging itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/exporter.h"
#include "drasync/kube_client.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "testutil.h"
#include "tu_httpd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	int n;
	enum ds_log_level level;
	char name[64], fields[512];
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

/* An exporter on a stand-in API server (never asked here), its events into seen. */
struct fx {
	struct tu_httpd h;
	ds_kube *k;
	ds_exporter *ex;
	char *dir, *kcpath;
};

static int fx_open(struct fx *f, struct seen *seen)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_exporter_config cfg;
	ds_err err = {0};

	memset(f, 0, sizeof(*f));
	f->dir = tu_mkdtemp("exporter-events");
	tu_httpd_start(&f->h);
	f->kcpath = tu_httpd_kubeconfig(&f->h, f->dir, "tok");
	ds_kube_transport_opts_init(&o);
	assert_int_equal(ds_kubeconfig_load(&kc, f->kcpath, NULL, &err), 0);
	assert_int_equal(ds_kube_new(&f->k, &kc, &o, &err), 0);
	ds_exporter_config_default(&cfg);
	cfg.kube = f->k;
	cfg.state_dir = f->dir;
	cfg.ns_match = any_namespace;
	cfg.on_event = on_event;
	cfg.event_ud = seen;
	return ds_exporter_new(&f->ex, &cfg, &err);
}

static void fx_close(struct fx *f)
{
	ds_exporter_free(f->ex);
	ds_kube_free(f->k);
	tu_httpd_stop(&f->h);
	free(f->kcpath);
	free(f->dir);
}

static int open_exporter(struct seen *seen)
{
	struct fx f;
	/* opening reports how the namespaces are read, without asking the cluster */
	int rc = fx_open(&f, seen);

	fx_close(&f);
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

/*
 * A refusal the target sends back (issue 22) is told once per object and
 * reason, at warn, as target_refused with the object quoted: the Acks that
 * repeat it are not news.
 */
static void test_exporter_events__a_refusal_is_told_once_per_object_and_reason(void **state)
{
	static const char why[] = "namespace hz-denied is not granted to source prod-east "
				  "(sources[0].namespaces)";
	struct seen seen = {0};
	struct fx f;
	ds_outbox *ob = NULL;
	ds_object_index *idx = NULL;
	ds_record r;
	ds_wire_result res[2] = {{1, DS_RESULT_REFUSED, why}, {1, DS_RESULT_REFUSED, why}};
	uint64_t counts[DS_RESULT_STATUS_MAX];
	char db[1200];
	ds_err err = {0};

	(void)state;
	assert_int_equal(fx_open(&f, &seen), 0);
	/* the record the target refused, pushed as the exporter pushes it */
	assert_int_equal(ds_export_db_path(f.dir, db, sizeof(db)), 0);
	assert_int_equal(ds_outbox_open(&ob, db, NULL, &err), 0);
	assert_int_equal(ds_object_index_open(&idx, db, &err), 0);
	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_UPSERT;
	r.api_version = "v1";
	r.kind = "ConfigMap";
	r.ns = "hz-denied";
	r.name = "a b";
	r.source_uid = "1";
	r.payload = (const uint8_t *)"{}";
	r.payload_len = 2;
	assert_int_equal(ds_object_index_push(idx, ob, &r, 1, NULL, &err), 0);

	seen.n = 0;
	ds_exporter_on_results(f.ex, res, 2);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.level, DS_LOG_WARN);
	assert_string_equal(seen.name, "target_refused");
	assert_non_null(strstr(seen.fields, "object=\"/ConfigMap/hz-denied/a b\" seq=1 "
					    "reason=\"namespace hz-denied is not granted"));
	ds_exporter_on_results(f.ex, res, 1);
	assert_int_equal(seen.n, 1);
	ds_exporter_result_counts(f.ex, counts);
	assert_int_equal(counts[DS_RESULT_REFUSED], 3);

	ds_object_index_free(idx);
	ds_outbox_free(ob);
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exporter_events__reported_through_the_callback),
	    cmocka_unit_test(test_exporter_events__a_refusal_is_told_once_per_object_and_reason),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
