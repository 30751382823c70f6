/*
 * What the apply stage tells the sources, over the real link: a real CURVE
 * receiver whose feedback reads a real ledger (apply_feedback), a real sender
 * draining a real outbox. The test does the applier's ledger steps itself
 * (ingest, pick, set) so that it decides when objects are applied: no API
 * server is involved in what is checked here.
 *
 * - apply results reach the source in later Acks, per seq, after the commit
 *   result of the same record;
 * - with nothing applied, the source may send up to maxUnappliedRecords and
 *   then waits (credit 0), the session stays up; as objects are applied the
 *   credit returns without any new batch from the source.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SOURCE "prod-east"
#define N_OBJECTS 200
#define MAX_UNAPPLIED 50

struct link {
	char *dir;
	char ledger[1024], outbox[1024];
	ds_keypair server, client;
	ds_apply_feedback *fb;
	ds_receiver *r;
	ds_sender *s;
	pthread_t rx_thread, tx_thread;
	pthread_mutex_t mu;
	/* per seq: the last status the source heard, and in which order */
	int status[N_OBJECTS + 1];
	int commit_first[N_OBJECTS + 1]; /* 1: the commit result came before the apply result */
	long applied_results;
};

static void on_result(void *ud, uint64_t seq, enum ds_result_status st, const char *msg)
{
	struct link *l = ud;

	(void)msg;
	if (seq == 0 || seq > N_OBJECTS)
		fail_msg("a result for seq %llu, never sent", (unsigned long long)seq);
	pthread_mutex_lock(&l->mu);
	if (st == DS_RESULT_OK && l->status[seq] == 0)
		l->commit_first[seq] = 1;
	l->status[seq] = (int)st;
	if (st == DS_RESULT_APPLIED)
		l->applied_results++;
	pthread_mutex_unlock(&l->mu);
}

static void on_results(void *ud, const ds_wire_result *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		on_result(ud, v[i].seq, v[i].status, v[i].message);
}

static void *rx_main(void *arg)
{
	struct link *l = arg;
	ds_err err = {0};

	ds_receiver_run(l->r, &err);
	return NULL;
}

static void *tx_main(void *arg)
{
	struct link *l = arg;
	ds_err err = {0};

	ds_sender_run(l->s, 0, 0, &err);
	return NULL;
}

static void fill_outbox(struct link *l)
{
	ds_outbox *ob;
	ds_record recs[N_OBJECTS];
	char json[N_OBJECTS][160], names[N_OBJECTS][32];
	ds_err err = {0};

	assert_int_equal(ds_outbox_open(&ob, l->outbox, NULL, &err), 0);
	for (int i = 0; i < N_OBJECTS; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		snprintf(names[i], sizeof(names[i]), "cfg-%d", i + 1);
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
	assert_int_equal(ds_outbox_push(ob, recs, N_OBJECTS, NULL, &err), 0);
	ds_outbox_free(ob);
}

static void link_start(struct link *l)
{
	ds_receiver_config rc;
	ds_sender_config sc;
	char auth[1024];
	FILE *f;
	ds_err err = {0};

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
	l->dir = tu_mkdtemp("apply-feedback");
	snprintf(l->ledger, sizeof(l->ledger), "%s/ledger.db", l->dir);
	snprintf(l->outbox, sizeof(l->outbox), "%s/outbox.db", l->dir);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", l->dir);
	assert_int_equal(ds_keys_generate(&l->server, &err), 0);
	assert_int_equal(ds_keys_generate(&l->client, &err), 0);
	f = fopen(auth, "w");
	assert_non_null(f);
	fprintf(f, "%s %s\n", SOURCE, l->client.public_z85);
	fclose(f);
	fill_outbox(l);

	if (ds_apply_feedback_open(&l->fb, l->ledger, &err) < 0)
		fail_msg("feedback: %s", err.msg);
	ds_receiver_config_default(&rc);
	rc.endpoint = "tcp://127.0.0.1:*";
	rc.keys = &l->server;
	rc.authorized_sources = auth;
	rc.inbox_path = l->ledger;
	rc.credit = 16;
	rc.max_unapplied = MAX_UNAPPLIED;
	rc.feedback_ms = 50;
	ds_apply_feedback_bind(l->fb, &rc.feedback);
	if (ds_receiver_new(&l->r, &rc, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	assert_int_equal(pthread_create(&l->rx_thread, NULL, rx_main, l), 0);

	ds_sender_config_default(&sc);
	sc.endpoint = ds_receiver_endpoint(l->r);
	sc.server_public_key = l->server.public_z85;
	sc.keys = &l->client;
	sc.outbox_path = l->outbox;
	sc.cluster_name = SOURCE;
	sc.batch_records = 10;
	sc.on_results = on_results;
	sc.ud = l;
	if (ds_sender_new(&l->s, &sc, &err) < 0)
		fail_msg("sender: %s", err.msg);
	assert_int_equal(pthread_create(&l->tx_thread, NULL, tx_main, l), 0);
}

static void link_stop(struct link *l)
{
	ds_sender_stop(l->s);
	pthread_join(l->tx_thread, NULL);
	ds_sender_free(l->s);
	ds_receiver_stop(l->r);
	pthread_join(l->rx_thread, NULL);
	ds_receiver_free(l->r);
	ds_apply_feedback_free(l->fb);
	pthread_mutex_destroy(&l->mu);
	free(l->dir);
}

/* Wait until the acked seq stops moving for 1 s; returns it. */
static uint64_t acked_when_still(struct link *l)
{
	uint64_t last = ds_sender_acked(l->s);
	long long still_since = tu_now_ms(), end = tu_now_ms() + 30000;

	while (tu_now_ms() < end) {
		uint64_t now;
		tu_msleep(50);
		now = ds_sender_acked(l->s);
		if (now != last) {
			last = now;
			still_since = tu_now_ms();
		} else if (tu_now_ms() - still_since >= 1000) {
			return now;
		}
	}
	fail_msg("the acked seq never settled");
	return 0;
}

static void test_apply_feedback__credit_follows_backlog_results_follow_commits(void **state)
{
	struct link l;
	ds_object_state *st;
	ds_err err = {0};
	uint64_t acked;
	long long end;
	size_t done = 0;

	(void)state;
	link_start(&l);
	/* Nothing applied: the source sends up to the bound and waits. */
	acked = acked_when_still(&l);
	assert_true(acked >= MAX_UNAPPLIED - 16);
	assert_true(acked <= MAX_UNAPPLIED);
	assert_int_equal(ds_sender_target_unapplied(l.s), acked);

	/* Apply as the applier would: the credit comes back on its own, the
	 * stream goes on to the end, and every record hears it was applied. */
	assert_int_equal(ds_object_state_open(&st, l.ledger, &err), 0);
	end = tu_now_ms() + 60000;
	while (tu_now_ms() < end) {
		long heard;
		done += tu_apply_mark_applied(st, 20);
		pthread_mutex_lock(&l.mu);
		heard = l.applied_results;
		pthread_mutex_unlock(&l.mu);
		if (done == N_OBJECTS && heard == N_OBJECTS)
			break;
		tu_msleep(20);
	}
	ds_object_state_free(st);
	assert_int_equal(done, N_OBJECTS);
	assert_int_equal(ds_sender_acked(l.s), N_OBJECTS);
	pthread_mutex_lock(&l.mu);
	assert_int_equal(l.applied_results, N_OBJECTS);
	for (int seq = 1; seq <= N_OBJECTS; seq++) {
		if (l.status[seq] != DS_RESULT_APPLIED || !l.commit_first[seq])
			fail_msg("seq %d: last heard %s, commit result first: %d", seq,
				 ds_result_status_name((enum ds_result_status)l.status[seq]),
				 l.commit_first[seq]);
	}
	pthread_mutex_unlock(&l.mu);
	/* Everything is applied: the source sees no backlog. */
	end = tu_now_ms() + 5000;
	while (ds_sender_target_unapplied(l.s) != 0 && tu_now_ms() < end)
		tu_msleep(50);
	assert_int_equal(ds_sender_target_unapplied(l.s), 0);
	link_stop(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_apply_feedback__credit_follows_backlog_results_follow_commits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
