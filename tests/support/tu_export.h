#ifndef DRASYNC_TU_EXPORT_H
#define DRASYNC_TU_EXPORT_H

/*
 * A source site for tests of the exporter against the real source clusters
 * (tests/kube fixtures; include after cmocka.h): namespaces selected by a
 * label unique to the run (or, in the "_by_list" runs, by name), an exporter
 * and its sender as the source agent runs them, feeding a tu_target in this
 * process; and stderr teed into memory to assert on what the exporter logs.
 */

#include "drasync/err.h"
#include "drasync/exporter.h"
#include "drasync/kube_client.h"
#include "drasync/sender.h"
#include "tu_target.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The namespace label the sites select by. */
#define TU_EXPORT_LABEL "drasync-itest"

/** cmocka setup: this test's agents select by name the last namespace new_ns() selected. */
int tu_export_list_on(void **state);

/** cmocka teardown of tu_export_list_on(): back to selecting by the label. */
int tu_export_list_off(void **state);

/** A namespace itx-<prefix>-..., labelled for this run's selector `label` when `selected`. */
char *tu_export_new_ns(ds_kube *k, const char *prefix, const char *label, bool selected);

/** An exporter ns_match: ns carries TU_EXPORT_LABEL = ud (a string). */
bool tu_export_by_label(void *ud, const json_t *ns);

struct tu_export_site {
	char *dir;
	char state[1024];
	char label[32];
	tu_target *t; /* the target site, in this process */
	/* the source agent */
	ds_kube *k;
	ds_exporter *ex;
	ds_sender *tx;
	pthread_t tx_thread, ex_thread;
	bool watching;
	int watch_rc;
	ds_err watch_err;
	const char *ns_list[1]; /* set: select by this list instead of the label */
	size_t manifest_part;	/* set: manifest entries a record (0: the default) */
	/* the expiry test: what to do once the templates are listed */
	const char *expire_ns;
	bool expire_done;
};

/** A fresh site: a state directory, a run label, the target, a client of kubeconfig. */
void tu_export_site_start(struct tu_export_site *s, const char *kubeconfig);

/** The source agent: an exporter on the state directory and its sender (0: defaults). */
void tu_export_agent_start(struct tu_export_site *s, long page, size_t batch, int watch_timeout);

/** Run the exporter's watch on a thread of its own until tu_export_agent_stop(). */
void tu_export_agent_watch(struct tu_export_site *s);

/** Wait until the target acknowledged everything the exporter pushed. */
void tu_export_wait_acked(struct tu_export_site *s, int timeout_ms);

/** Wait until nothing more arrives for quiet_ms (watch mode). */
void tu_export_settle(struct tu_export_site *s, int quiet_ms);

/** Stop and free the source agent; fails the test when its watch failed. */
void tu_export_agent_stop(struct tu_export_site *s);

/** Stop the agent if it runs, the target, and free the site. */
void tu_export_site_stop(struct tu_export_site *s);

/** One exporter pass; fails the test on an error. */
ds_export_counts tu_export_pass(struct tu_export_site *s);

/** Start teeing stderr into memory (it is still shown). */
void tu_log_begin(void);

/** What was logged since tu_log_begin() (to free). */
char *tu_log_text(void);

/** Stop capturing; what was logged (to free). */
char *tu_log_end(void);

/** How many lines of text hold a, and b and c unless NULL. */
int tu_lines_with(const char *text, const char *a, const char *b, const char *c);

/** The key "group/kind/ns/name" of an object (ns NULL: cluster-scoped). */
void tu_key_of(char *buf, size_t size, const char *group, const char *kind, const char *ns,
	       const char *name);

#endif
