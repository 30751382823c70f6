/*
 * Per-source quotas over the real link: a real CURVE receiver whose feedback
 * reads a real ledger (apply_feedback), two real senders with keys of their
 * own ("noisy" and "quiet") draining real outboxes. The test does the
 * applier's ledger steps itself, so nothing is applied until it says so.
 *
 * - noisy (maxUnappliedRecords 20) stops at its bound with nothing applied
 *   and is reported throttled, once; quiet, under the same ceiling, sends all
 *   its records meanwhile;
 * - as objects are applied noisy resumes (reported once per transition) and
 *   ends with every record committed;
 * - a source over its ledger bytes is throttled until its quota is raised.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/apply_feedback.h"
#include "drasync/keys.h"
#include "drasync/object_state.h"
#include "drasync/outbox.h"
#include "drasync/receiver.h"
#include "drasync/sender.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_NOISY 120
#define N_QUIET 100
#define NOISY_BOUND 20
#define CEILING 1000

struct src {
	const char *name;
	char outbox[1024];
	ds_keypair keys;
	ds_sender *s;
	pthread_t thread;
};

struct fx {
	char *dir;
	char ledger[1024];
	ds_keypair server;
	ds_apply_feedback *fb;
	ds_receiver *r;
	pthread_t rx_thread;
	struct src noisy, quiet;
	pthread_mutex_t mu;
	char events[4096];	    /* "name detail\n" of the quota events */
	_Atomic uint64_t max_bytes; /* noisy's maxLedgerBytes (0: unlimited) */
	uint64_t noisy_bound;	    /* noisy's maxUnappliedRecords */
};

static void on_event(void *ud, const ds_transport_event *ev)
{
	struct fx *f = ud;
	size_t len;

	if (strncmp(ev->name, "source_", 7) != 0 && strcmp(ev->name, "peer_dropped") != 0)
		return;
	pthread_mutex_lock(&f->mu);
	len = strlen(f->events);
	snprintf(f->events + len, sizeof(f->events) - len, "%s %s\n", ev->name, ev->detail);
	pthread_mutex_unlock(&f->mu);
}

static void limits(void *ud, const char *source, ds_quota_limits *out)
{
	struct fx *f = ud;

	if (strcmp(source, "noisy") == 0) {
		out->max_unapplied = f->noisy_bound;
		out->max_ledger_bytes = atomic_load(&f->max_bytes);
	}
}

static int count(struct fx *f, const char *part)
{
	int n = 0;

	pthread_mutex_lock(&f->mu);
	for (const char *p = strstr(f->events, part); p; p = strstr(p + 1, part))
		n++;
	pthread_mutex_unlock(&f->mu);
	return n;
}

static void fill(struct src *s, int n)
{
	ds_outbox *ob;
	ds_record *recs = calloc((size_t)n, sizeof(*recs));
	char(*json)[200] = calloc((size_t)n, sizeof(*json));
	char(*names)[48] = calloc((size_t)n, sizeof(*names));
	ds_err err = {0};

	assert_non_null(recs);
	assert_non_null(json);
	assert_non_null(names);
	assert_int_equal(ds_outbox_open(&ob, s->outbox, NULL, &err), 0);
	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "%s-%d", s->name, i + 1);
		recs[i].op = DS_RECORD_UPSERT;
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml-team";
		recs[i].name = names[i];
		recs[i].source_uid = "uid";
		recs[i].payload = (const uint8_t *)json[i];
		recs[i].payload_len = (size_t)snprintf(
		    json[i], sizeof(json[i]),
		    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
		    "\"namespace\":\"ml-team\"},\"data\":{\"v\":\"%d\"}}",
		    names[i], i);
	}
	assert_int_equal(ds_outbox_push(ob, recs, (size_t)n, NULL, &err), 0);
	ds_outbox_free(ob);
	free(recs);
	free(json);
	free(names);
}

static void *rx_main(void *arg)
{
	struct fx *f = arg;
	ds_err err = {0};

	ds_receiver_run(f->r, &err);
	return NULL;
}

static void *tx_main(void *arg)
{
	struct src *s = arg;
	ds_err err = {0};

	ds_sender_run(s->s, 0, 0, &err);
	return NULL;
}

static void src_start(struct fx *f, struct src *s)
{
	ds_sender_config sc;
	ds_err err = {0};

	ds_sender_config_default(&sc);
	sc.endpoint = ds_receiver_endpoint(f->r);
	sc.server_public_key = f->server.public_z85;
	sc.keys = &s->keys;
	sc.outbox_path = s->outbox;
	sc.cluster_name = s->name;
	sc.batch_records = 10;
	if (ds_sender_new(&s->s, &sc, &err) < 0)
		fail_msg("sender %s: %s", s->name, err.msg);
	assert_int_equal(pthread_create(&s->thread, NULL, tx_main, s), 0);
}

static void src_stop(struct src *s)
{
	ds_sender_stop(s->s);
	pthread_join(s->thread, NULL);
	ds_sender_free(s->s);
}

static void fx_start(struct fx *f, int n_noisy, uint64_t noisy_bound, uint64_t noisy_bytes)
{
	ds_receiver_config rc;
	char auth[1024];
	FILE *fp;
	ds_err err = {0};

	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	atomic_store(&f->max_bytes, noisy_bytes);
	f->noisy_bound = noisy_bound;
	f->dir = tu_mkdtemp("source-quota");
	f->noisy.name = "noisy";
	f->quiet.name = "quiet";
	snprintf(f->ledger, sizeof(f->ledger), "%s/ledger.db", f->dir);
	snprintf(f->noisy.outbox, sizeof(f->noisy.outbox), "%s/noisy.db", f->dir);
	snprintf(f->quiet.outbox, sizeof(f->quiet.outbox), "%s/quiet.db", f->dir);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", f->dir);
	assert_int_equal(ds_keys_generate(&f->server, &err), 0);
	assert_int_equal(ds_keys_generate(&f->noisy.keys, &err), 0);
	assert_int_equal(ds_keys_generate(&f->quiet.keys, &err), 0);
	fp = fopen(auth, "w");
	assert_non_null(fp);
	fprintf(fp, "noisy %s\nquiet %s\n", f->noisy.keys.public_z85, f->quiet.keys.public_z85);
	fclose(fp);
	fill(&f->noisy, n_noisy);
	fill(&f->quiet, N_QUIET);

	if (ds_apply_feedback_open(&f->fb, f->ledger, &err) < 0)
		fail_msg("feedback: %s", err.msg);
	ds_receiver_config_default(&rc);
	rc.endpoint = "tcp://127.0.0.1:*";
	rc.keys = &f->server;
	rc.authorized_sources = auth;
	rc.inbox_path = f->ledger;
	rc.credit = 16;
	rc.max_unapplied = CEILING;
	rc.feedback_ms = 50;
	rc.source_limits = limits;
	rc.limits_ud = f;
	rc.on_event = on_event;
	rc.event_ud = f;
	ds_apply_feedback_bind(f->fb, &rc.feedback);
	if (ds_receiver_new(&f->r, &rc, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	assert_int_equal(pthread_create(&f->rx_thread, NULL, rx_main, f), 0);
	src_start(f, &f->noisy);
	src_start(f, &f->quiet);
}

static void fx_stop(struct fx *f)
{
	src_stop(&f->noisy);
	src_stop(&f->quiet);
	ds_receiver_stop(f->r);
	pthread_join(f->rx_thread, NULL);
	ds_receiver_free(f->r);
	ds_apply_feedback_free(f->fb);
	pthread_mutex_destroy(&f->mu);
	free(f->dir);
}

/* Wait until s's acked seq stops moving for 1 s; returns it. */
static uint64_t acked_when_still(struct src *s)
{
	uint64_t last = ds_sender_acked(s->s);
	long long still_since = tu_now_ms(), end = tu_now_ms() + 30000;

	while (tu_now_ms() < end) {
		uint64_t now;
		tu_msleep(50);
		now = ds_sender_acked(s->s);
		if (now != last) {
			last = now;
			still_since = tu_now_ms();
		} else if (tu_now_ms() - still_since >= 1000) {
			return now;
		}
	}
	fail_msg("the acked seq of %s never settled", s->name);
	return 0;
}

static void wait_acked(struct src *s, uint64_t seq)
{
	long long end = tu_now_ms() + 30000;

	while (ds_sender_acked(s->s) < seq && tu_now_ms() < end)
		tu_msleep(20);
	if (ds_sender_acked(s->s) < seq)
		fail_msg("%s: acked %llu, want %llu", s->name,
			 (unsigned long long)ds_sender_acked(s->s), (unsigned long long)seq);
}

struct seen {
	const char *source;
	ds_quota_row row;
	bool found;
};

static void find_row(void *ud, const ds_quota_row *row)
{
	struct seen *s = ud;

	if (strcmp(row->source, s->source) == 0) {
		s->row = *row;
		s->found = true;
	}
}

static struct seen quota_of(struct fx *f, const char *source)
{
	struct seen s = {.source = source};

	ds_quota_each(ds_receiver_quota(f->r), find_row, &s);
	assert_true(s.found);
	return s;
}

static void test_source_quota__noisy_source_stops_at_its_bound_not_the_other(void **state)
{
	struct fx f;
	ds_object_state *st;
	ds_err err = {0};
	uint64_t acked;
	long long end;
	struct seen q;

	(void)state;
	fx_start(&f, N_NOISY, NOISY_BOUND, 0);
	/* Nothing applied: noisy stops at its bound, quiet sends everything. */
	wait_acked(&f.quiet, N_QUIET);
	acked = acked_when_still(&f.noisy);
	assert_true(acked <= NOISY_BOUND);
	assert_true(acked >= NOISY_BOUND - 10);
	end = tu_now_ms() + 5000;
	while (!count(&f, "source_throttled source=noisy quota=backlog") && tu_now_ms() < end)
		tu_msleep(20);
	assert_int_equal(count(&f, "source_throttled source=noisy quota=backlog value=20 limit=20"),
			 1);
	assert_int_equal(count(&f, "source=quiet"), 0);
	q = quota_of(&f, "noisy");
	assert_int_equal(q.row.throttled, DS_QUOTA_BACKLOG);
	assert_int_equal(q.row.usage.backlog, NOISY_BOUND);
	assert_true(q.row.usage.ledger_bytes > 0);
	q = quota_of(&f, "quiet");
	assert_int_equal(q.row.throttled, DS_QUOTA_NONE);
	assert_int_equal(q.row.usage.backlog, N_QUIET);

	/* Applying lets noisy resume, again and again, to the end. */
	assert_int_equal(ds_object_state_open(&st, f.ledger, &err), 0);
	end = tu_now_ms() + 60000;
	while (ds_sender_acked(f.noisy.s) < N_NOISY && tu_now_ms() < end) {
		tu_apply_mark_applied(st, 8);
		tu_msleep(30);
	}
	ds_object_state_free(st);
	assert_int_equal(ds_sender_acked(f.noisy.s), N_NOISY);
	assert_true(count(&f, "source_resumed source=noisy quota=backlog") >= 1);
	/* One line per transition: never more resumed than throttled lines. */
	assert_true(count(&f, "source_resumed source=noisy") <=
		    count(&f, "source_throttled source=noisy"));
	assert_true(count(&f, "source_throttled source=noisy") < N_NOISY / 5);
	assert_int_equal(count(&f, "peer_dropped"), 0);
	fx_stop(&f);
}

static void test_source_quota__ledger_bytes_quota_holds_until_raised(void **state)
{
	struct fx f;
	uint64_t acked;
	long long end;
	struct seen q;

	(void)state;
	/* About 110 bytes a record: its first batch (10) passes 500 bytes while
	 * the next one is on its way under the credit granted before: still taken. */
	fx_start(&f, 60, CEILING, 500);
	wait_acked(&f.quiet, N_QUIET);
	acked = acked_when_still(&f.noisy);
	assert_true(acked < 40);
	q = quota_of(&f, "noisy");
	assert_int_equal(q.row.throttled, DS_QUOTA_LEDGER_BYTES);
	assert_true(q.row.usage.ledger_bytes >= 500);
	assert_int_equal(count(&f, "source_throttled source=noisy quota=ledger_bytes"), 1);
	/* Raised (as a reload does): it resumes at the next recount and sends the rest. */
	atomic_store(&f.max_bytes, 0);
	end = tu_now_ms() + 5000;
	while (!count(&f, "source_resumed source=noisy quota=ledger_bytes") && tu_now_ms() < end)
		tu_msleep(20);
	assert_int_equal(count(&f, "source_resumed source=noisy quota=ledger_bytes"), 1);
	wait_acked(&f.noisy, 60);
	assert_int_equal(count(&f, "peer_dropped"), 0);
	q = quota_of(&f, "noisy");
	assert_int_equal(q.row.throttled, DS_QUOTA_NONE);
	fx_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_quota__noisy_source_stops_at_its_bound_not_the_other),
	    cmocka_unit_test(test_source_quota__ledger_bytes_quota_holds_until_raised),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
