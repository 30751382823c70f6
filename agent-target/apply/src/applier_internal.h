#ifndef DRASYNC_APPLIER_INTERNAL_H
#define DRASYNC_APPLIER_INTERNAL_H

/*
 * What the parts of the applier share. applier.c: the lifecycle and the run
 * loop (the pass, settle, the ledger-full wait); applier_prepare.c: deciding
 * and recording outcomes, preparing an object (payload, pipeline, hash);
 * applier_preflight.c: what an object needs on the target first;
 * applier_stream.c: applying the pass's upserts; applier_delete.c: tombstones.
 */

#include "drasync/applier.h"
#include "drasync/dra_convert.h"
#include "drasync/kube_client.h"
#include "drasync/namespace_mode.h"
#include "drasync/object_state.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REASON_MAX 768
/* ds_applier.dra_gen before the first look at discovery */
#define DRA_UNKNOWN ((unsigned long)-1)

struct ds_applier {
	ds_applier_config cfg;
	ds_object_state *st;
	enum ds_dra_version dra;
	unsigned long dra_gen;	/* the discovery generation dra was picked from */
	unsigned long pass_gen; /* the discovery generation when the pass began */
	double picked;		/* when the pass took its objects (ds_clock_mono_s) */
	double last_sent;	/* when the pass's stream sent its last write (ds_clock_mono_s) */
	pthread_mutex_t mu;	/* guards stats, notified, stopping, next_cfg */
	pthread_cond_t cond;
	bool notified, stopping;
	atomic_bool applying; /* a pass is applying objects it picked */
	bool ingested;	      /* settle() folded records in: the pass wakes the waiting */
	const ds_target_config *next_cfg; /* taken at the start of the next pass */
	ds_applier_stats stats;
	json_t *present; /* per pass: "kind/ns/name" -> whether it exists on the target */
	json_t
	    *objs; /* per pass: "kind/ns/name" -> a claim, template or Namespace as on the target */
	/* scheduling.k8s.io version the target serves (Workload, PodGroup) */
	enum ds_sched_version sched;
	json_t *groups;	 /* per pass: "source\nkey" -> a PodGroup as its source has it, or null */
	json_t *classes; /* per pass, when asked: the target's DeviceClasses */
	json_t *members; /* per pass: "source\nns\ngroup" -> the workloads that join it */
	/* per pass: "source\nkey" of a PodGroup or Workload whose claims follow a member
	 * prepared in it (decided again after the pass), and of every row prepared */
	json_t *regroup, *prepared;
	bool regrouped; /* per pass: a group was made due again (its members wait for it) */
	/* "source\nkey" of a PodGroup -> the newest record (records.id) the ledger held when
	 * it was last decided: a member record up to it was among those it followed */
	json_t *group_seen;
	ds_object_state_scope scope; /* cfg.namespaces, when set */
	ds_namespace_modes *nm;
	ds_namespace_mode *modes; /* the ledger's namespace modes, read once per pass */
	size_t n_modes;
	uint64_t modes_pass; /* the pass they were read for; 0: never */
	/* Rows desiring records up to this one were there when the applier
	 * started: a run before it (killed) may have written them without
	 * recording it. Before such a row is written, the object on the target
	 * is looked at: with the annotation of the same hash, it is applied
	 * already. 0 once a pass had no such row. */
	int64_t verify_upto;
	bool verify_seen; /* per pass: a row up to verify_upto came to be written */
	json_t *live;	  /* per pass: "api|kind|ns" -> name -> its applied-hash annotation */
	/* per pass, for first writes: "api|kind|ns" -> {"seen": n, "names": {name: [managed-by,
	 * source-cluster]}} once a list of what is there replaced a read per object */
	json_t *exists;
	/* ds_applier_run()'s compaction, on a connection of its own (opened at its first) */
	ds_store *compact_store;
	ds_ledger_compactor *compactor;
	int64_t compact_at;		  /* the next one is due (ds_clock_mono_ms) */
	ds_ledger_compact_stats unlogged; /* done since the last on_compacted */
	int64_t compact_said;		  /* the last on_compacted (ds_clock_mono_ms); 0: never */
};

/* What guarded_delete() did: DELETED (reason empty: deleted, else why it was not there),
 * KEPT (reason says why), or 0: the call `what` failed with rc and ke. */
struct gone {
	enum ds_apply_state state;
	const char *what;
	int rc;
	ds_kube_error ke;
	char reason[REASON_MAX];
};

/* One object of a pass. */
struct item {
	ds_object_state_row *row;
	json_t *obj; /* the transformed object to apply */
	int rank;
	struct ds_kube_resource res;
	uint8_t hash[DS_HASH_LEN];
	bool decided, unchanged;
	bool takeover;	/* fields other managers owned were taken (the reason names them) */
	bool recreated; /* deleted and created again: an immutable field changed */
	int refusal;	/* decided refused: its enum ds_refusal; else -1 */
	size_t rep_first, rep_n; /* its entries in the pass's report */
	ds_object_state_result out;
	char reason[REASON_MAX];
	/* while it is applied (the pass's stream) */
	struct ds_kube_op op;
	bool forced;		  /* sent again with force after a conflict */
	char note[REASON_MAX];	  /* preflight's note (what a claim's DeviceClass lacks) */
	char took[REASON_MAX];	  /* what a forced apply took over */
	bool sent;		  /* handed to the client */
	struct item **dependents; /* of the pass, waiting for it to be decided */
	size_t n_dependents, cap_dependents;
	size_t blockers; /* of the pass it waits for */
	bool finished;	 /* decided (and on its way to the ledger) */
};

/* Add n to a stats field under the applier's lock. */
void ds_applier_count(ds_applier *a, uint64_t *field, uint64_t n);

/* Pick the DRA version again when discovery changed. @return whether it changed */
bool ds_applier_follow_discovery(ds_applier *a);

/* Decide it: its state and reason (printf-style). */
void ds_applier_decide(struct item *it, enum ds_apply_state s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Try it again after a backoff (at least the server's Retry-After). */
void ds_applier_decide_retry(ds_applier *a, struct item *it, const ds_kube_error *ke);

/* The API call `what` failed with rc and ke: retry when transient, else fail it. */
void ds_applier_decide_kube_failure(ds_applier *a, struct item *it, const char *what, int rc,
				    const ds_kube_error *ke);

/* Record n outcomes in one ledger transaction, then tell the agent. @return 0 or < 0 */
int ds_applier_record_all(ds_applier *a, struct item **v, size_t n, const ds_report *rep,
			  ds_err *err);

void ds_applier_hash_hex(const uint8_t hash[DS_HASH_LEN], char hex[2 * DS_HASH_LEN + 1]);
/* Whether obj's applied-hash annotation leaves its parking out (a Deployment: see
 * applier_prepare.c), so that already_there compares the parking itself. */
bool ds_applier_parking_apart(const json_t *obj);

/* The PodGroups and Workloads whose members the pass prepared, and which it did not prepare
 * itself, made due again: their claims follow their members. @return 0 or < 0 */
int ds_applier_regroup(ds_applier *a, ds_err *err);

/* Prepare it for the target (payload, pipeline, hash) or decide it. @return 0 or < 0 */
int ds_applier_prepare(ds_applier *a, struct item *it, ds_report *rep);

/* The DRA apiVersion a kind is applied with, NULL when not a DRA kind. */
const char *ds_applier_need_api(const ds_applier *a, const char *kind);

bool ds_applier_is_claim_or_template(const char *kind);

/* "kind/ns/name", the key of the pass's per-object caches. */
void ds_applier_obj_key(const char *kind, const char *ns, const char *name, char *buf, size_t size);

/* What it needs on the target first; decides it when that is missing (see applier_preflight.c).
 * @return 0, -ENOMEM */
int ds_applier_preflight(ds_applier *a, struct item *it, char *note, size_t note_size);

/* A claim or template whose request asks for adminAccess waits for its target Namespace's
 * grant (resource.kubernetes.io/admin-access: "true"), said in its reason. */
void ds_applier_decide_wait_admin(ds_applier *a, struct item *it, const char *request);

/* Apply the pass's upserts through the client's stream. @return 0 or < 0 */
int ds_applier_apply_upserts(ds_applier *a, struct item **v, size_t n, const ds_report *rep,
			     bool *applied_any, ds_err *err);

/* Delete the target object when drasync made it for r (struct gone says what happened). */
void ds_applier_guarded_delete(ds_applier *a, const ds_object_state_row *r, const char *api,
			       const char *ns, const char *name, struct gone *g);

/* Decide a tombstone. */
void ds_applier_tombstone(ds_applier *a, struct item *it);

/* Refuse it (SPEC §5 trust boundary): state refused, reason printf-style. */
void ds_applier_refuse(struct item *it, int refusal, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The record of it against its source's grant, before anything of it reaches the API server:
 * kind, names, the reference against the payload (it->obj, NULL for a tombstone), the
 * namespace, the pod specs. Refuses it when outside. @return whether it may go on */
bool ds_applier_trust_check(ds_applier *a, struct item *it);

/* An upsert this source never wrote on the target: the object there (if any) must carry
 * drasync's marks for this source, else it is refused (adoptExisting: taken over, said
 * once in the reason). Decides it when refused or when the check could not be made.
 * @return 0, -ENOMEM */
int ds_applier_check_first_write(ds_applier *a, struct item *it);

/* Whether Namespace `name` exists on the target and drasync did not create it (no
 * drasync.io/created): drasync writes nothing on such a Namespace, for any source.
 * @return 1 yes, 0 no (absent, or drasync's), negative errno when the API could not say */
int ds_applier_namespace_foreign(ds_applier *a, const char *name);

/* A Namespace drasync applies: the source's pod-security.kubernetes.io labels dropped and
 * the enforce level of the source's grant set (a Namespace drasync did not create is not
 * written: see mark_created_namespace). @return 0, -ENOMEM */
int ds_applier_namespace_labels(ds_applier *a, struct item *it);

#endif
