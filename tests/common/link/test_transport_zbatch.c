/*
 * ZBatch frames between agents of either version, over real CURVE sockets on
 * loopback and real SQLite files: the capability negotiated, every record
 * committed once either way, the ledger's rows alike, the link's figures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/clock.h"
#include "drasync/sender.h"
#include "testutil.h"
#include "tu_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3000

struct run {
	long long zstd_rows, bytes_stored;
	ds_link_figures tx, rx;
	bool tx_zbatch_event;
};

/* N records from a sender (no_zbatch: as an older source) to a receiver (as an older target). */
static void one_run(const char *tag, bool old_source, bool old_target, struct run *out)
{
	char *dir = tu_mkdtemp(tag);
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	ds_sender_config cfg;
	ds_link_stats txs;
	char outbox[1024], inbox[1024];
	struct tu_rx rx = {0};
	ds_sender *s;
	struct tu_events ev;
	ds_err err = {0};

	memset(&txs, 0, sizeof(txs));
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, N);
	rx.no_zbatch = old_target;
	tu_rx_start(&rx, dir, &server, 0);
	tu_events_init(&ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = outbox;
	cfg.cluster_name = "prod-east";
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &ev;
	cfg.stats = &txs;
	cfg.no_zbatch = old_source;
	assert_int_equal(ds_sender_new(&s, &cfg, &err), 0);
	assert_int_equal(ds_sender_run(s, N, 60000, &err), 0);
	assert_int_equal(ds_sender_acked(s), N);
	assert_false(tu_events_has(&rx.ev, "peer_dropped", NULL));
	out->tx_zbatch_event = tu_events_has(&ev, "session_open", "batches zbatch");
	assert_true(out->tx_zbatch_event ||
		    tu_events_has(&ev, "session_open", "batches per-record zstd"));
	ds_link_stats_read(&txs, &out->tx);
	ds_sender_free(s);
	tu_rx_stop(&rx);
	ds_link_stats_read(&rx.stats, &out->rx);
	tu_assert_exactly_once_in_order(inbox, "prod-east", N);
	out->zstd_rows = tu_query_ll(inbox, "SELECT count(*) FROM records WHERE compression = 1");
	out->bytes_stored = tu_query_ll(inbox, "SELECT sum(length(payload)) FROM records");
	tu_events_dispose(&ev);
	free(dir);
}

static void test_transport_zbatch__negotiated_between_versions(void **state)
{
	struct run both, old_t, old_s;

	(void)state;
	one_run("zb-both", false, false, &both);
	one_run("zb-old-target", false, true, &old_t);
	one_run("zb-old-source", true, false, &old_s);

	/* Only two new agents use ZBatch frames; the sender says so at session_open. */
	assert_true(both.tx_zbatch_event);
	assert_true(both.tx.zbatch);
	assert_false(old_t.tx_zbatch_event);
	assert_false(old_s.tx_zbatch_event);

	/* Whatever came, the ledger holds the same rows (these payloads are under the
	 * 512-byte threshold: plain; test_wire_zbatch covers the re-compressed ones). */
	assert_true(both.bytes_stored > 0);
	assert_int_equal(both.zstd_rows, old_t.zstd_rows);
	assert_int_equal(both.zstd_rows, old_s.zstd_rows);
	assert_int_equal(both.bytes_stored, old_t.bytes_stored);

	/* The figures: what one end sent the other received; same JSON each way. */
	assert_int_equal(both.tx.sent, both.rx.received);
	assert_int_equal(both.tx.received, both.rx.sent);
	assert_true(both.tx.json > 0);
	assert_int_equal(both.tx.json, both.rx.json);
	assert_int_equal(both.tx.json, old_t.tx.json);
	assert_int_equal(both.tx.session_sent, both.tx.sent); /* one session */
	/* Shared context: far fewer bytes than per-record frames for the same JSON. */
	assert_true(both.tx.sent * 2 < old_t.tx.sent);
	assert_true(ds_link_figures_ratio(both.tx.sent, both.tx.received, both.tx.json) < 0.25);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transport_zbatch__negotiated_between_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
