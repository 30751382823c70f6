#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_target.h"

#include "drasync/buf.h"
#include "drasync/receiver.h"
#include "testutil.h"
#include "tu_kube.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arrival {
	tu_arrival pub;
	char *payload; /* pub.payload, owned */
};

struct tu_target {
	ds_keypair server, source;
	ds_receiver *rx;
	pthread_t thread;
	tu_target_verdict_fn verdict;
	void *ud;
	pthread_mutex_t mu;
	struct arrival *a;
	size_t n, cap;
};

void tu_target_verdict_by_name(void *ud, const ds_record *rec, ds_record_result *res)
{
	(void)ud;
	if (rec->name && strncmp(rec->name, "bad", 3) == 0) {
		res->status = DS_RESULT_FAILED;
		snprintf(res->message, sizeof(res->message),
			 "DeviceClass gpu.nowhere.example does not exist on the target");
	} else if (rec->name && strncmp(rec->name, "skip", 4) == 0) {
		res->status = DS_RESULT_SKIPPED;
		snprintf(res->message, sizeof(res->message), "held in the ledger (standby)");
	}
}

static void on_record(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	tu_target *t = ud;
	struct arrival *a;

	(void)source;
	if (t->verdict)
		t->verdict(t->ud, rec, res);
	pthread_mutex_lock(&t->mu);
	if (ds_grow((void **)&t->a, &t->cap, t->n + 1, sizeof(*t->a)) < 0)
		fail_msg("out of memory");
	a = &t->a[t->n++];
	memset(a, 0, sizeof(*a));
	a->pub.op = rec->op;
	if (rec->op == DS_RECORD_UPSERT || rec->op == DS_RECORD_DELETE) {
		const char *slash = strchr(rec->api_version, '/');

		snprintf(a->pub.key, sizeof(a->pub.key), "%.*s/%s/%s/%s",
			 slash ? (int)(slash - rec->api_version) : 0, slash ? rec->api_version : "",
			 rec->kind, rec->ns ? rec->ns : "", rec->name);
		snprintf(a->pub.api_version, sizeof(a->pub.api_version), "%s", rec->api_version);
	}
	if (rec->payload)
		a->payload = strndup((const char *)rec->payload, rec->payload_len);
	a->pub.payload = a->payload;
	a->pub.manifest_len = rec->manifest_len;
	a->pub.parts_left = rec->parts_left;
	a->pub.seq = (unsigned long long)rec->seq;
	pthread_mutex_unlock(&t->mu);
}

static void *rx_main(void *arg)
{
	tu_target *t = arg;
	ds_err err = {0};

	ds_receiver_run(t->rx, &err);
	return NULL;
}

tu_target *tu_target_start(const char *dir, tu_target_verdict_fn verdict, void *ud)
{
	tu_target *t = calloc(1, sizeof(*t));
	ds_receiver_config cfg;
	char auth[1100], inbox[1100];
	ds_err err = {0};
	FILE *f;

	assert_non_null(t);
	pthread_mutex_init(&t->mu, NULL);
	t->verdict = verdict;
	t->ud = ud;
	assert_int_equal(ds_keys_generate(&t->server, &err), 0);
	assert_int_equal(ds_keys_generate(&t->source, &err), 0);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", dir);
	f = fopen(auth, "w");
	assert_non_null(f);
	fprintf(f, "source %s\n", t->source.public_z85);
	fclose(f);
	snprintf(inbox, sizeof(inbox), "%s/inbox.db", dir);
	ds_receiver_config_default(&cfg);
	cfg.endpoint = "tcp://127.0.0.1:*";
	cfg.keys = &t->server;
	cfg.authorized_sources = auth;
	cfg.inbox_path = inbox;
	cfg.handler = on_record;
	cfg.handler_ud = t;
	if (ds_receiver_new(&t->rx, &cfg, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	assert_int_equal(pthread_create(&t->thread, NULL, rx_main, t), 0);
	return t;
}

void tu_target_stop(tu_target *t)
{
	if (!t)
		return;
	ds_receiver_stop(t->rx);
	pthread_join(t->thread, NULL);
	ds_receiver_free(t->rx);
	for (size_t i = 0; i < t->n; i++)
		free(t->a[i].payload);
	free(t->a);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

const char *tu_target_endpoint(const tu_target *t)
{
	return ds_receiver_endpoint(t->rx);
}

const ds_keypair *tu_target_server_keys(const tu_target *t)
{
	return &t->server;
}

const ds_keypair *tu_target_source_keys(const tu_target *t)
{
	return &t->source;
}

const char *tu_target_write_source_key(const tu_target *t, const char *dir)
{
	static char path[1100];
	ds_err err = {0};

	if (ds_keys_write(dir, "source", &t->source, true, &err) < 0)
		fail_msg("writing the source key: %s", err.msg);
	snprintf(path, sizeof(path), "%s/source.key", dir);
	return path;
}

size_t tu_target_len(tu_target *t)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	n = t->n;
	pthread_mutex_unlock(&t->mu);
	return n;
}

tu_arrival tu_target_at(tu_target *t, size_t i)
{
	tu_arrival a;

	pthread_mutex_lock(&t->mu);
	if (i >= t->n) {
		pthread_mutex_unlock(&t->mu);
		tu_target_dump(t, 0);
		fail_msg("no record %zu at the target (%zu arrived)", i, tu_target_len(t));
	}
	a = t->a[i].pub;
	pthread_mutex_unlock(&t->mu);
	return a;
}

static int count(tu_target *t, size_t from, int op, const char *key, bool like)
{
	int n = 0;

	pthread_mutex_lock(&t->mu);
	for (size_t i = from; i < t->n; i++) {
		const tu_arrival *a = &t->a[i].pub;

		if (op && a->op != op)
			continue;
		if (key && (like ? !strstr(a->key, key) : strcmp(a->key, key) != 0))
			continue;
		n++;
	}
	pthread_mutex_unlock(&t->mu);
	return n;
}

int tu_target_count(tu_target *t, size_t from, int op, const char *key)
{
	return count(t, from, op, key, false);
}

int tu_target_count_like(tu_target *t, size_t from, int op, const char *part)
{
	return count(t, from, op, part, true);
}

char *tu_target_last_payload(tu_target *t, const char *key)
{
	char *p = NULL;

	pthread_mutex_lock(&t->mu);
	for (size_t i = t->n; i-- > 0;)
		if (t->a[i].pub.op == DS_RECORD_UPSERT && strcmp(t->a[i].pub.key, key) == 0) {
			p = t->a[i].payload ? strdup(t->a[i].payload) : NULL;
			break;
		}
	pthread_mutex_unlock(&t->mu);
	return p;
}

void tu_target_dump(tu_target *t, size_t from)
{
	pthread_mutex_lock(&t->mu);
	for (size_t i = from; i < t->n; i++)
		fprintf(stderr, "target[%zu] %s %s\n", i, ds_record_op_name(t->a[i].pub.op),
			t->a[i].pub.key);
	pthread_mutex_unlock(&t->mu);
}

void tu_target_wait(tu_target *t, size_t from, int op, const char *key, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	while (tu_target_count(t, from, op, key) == 0) {
		if (tu_now_ms() > end) {
			tu_target_dump(t, from);
			fail_msg("no %s of %s reached the target within %d ms",
				 op ? ds_record_op_name(op) : "record", key ? key : "any object",
				 timeout_ms);
		}
		tu_msleep(50);
	}
}
