#ifndef DRASYNC_SOURCE_GRANTS_H
#define DRASYNC_SOURCE_GRANTS_H

/*
 * What a TargetConfig grants each authorized source (SPEC §5 "Trust
 * boundary"): the source namespaces it may write, the Pod Security level its
 * pod specs must meet, whether it may ask for a relocation.
 *
 * With `sources` in the file, a source gets its entry and nothing more; a
 * source without an entry may write nothing. A file without `sources` grants
 * every authorized source the source namespaces named in namespaceMappings
 * (their `from` side), podSecurity baseline, no relocation: a source can never
 * write a namespace the target's file does not name for it.
 */

#include "drasync/err.h"
#include "drasync/pod_security.h"
#include "drasync/target_config.h"

#include <stdbool.h>
#include <stddef.h>

/* Why a record is refused: the `reason` label of drasync_target_refused_total. */
enum ds_refusal {
	DS_REFUSAL_NAMESPACE,	 /* the namespace is not granted to the source */
	DS_REFUSAL_POD_SECURITY, /* a pod spec violates the source's podSecurity */
	DS_REFUSAL_NAME,	 /* kind, namespace or name the API server would not take */
	DS_REFUSAL_REFERENCE,	 /* the record's reference disagrees with its payload */
	DS_REFUSAL_KIND,	 /* a kind drasync does not replicate */
	DS_REFUSAL_EXISTS,	 /* on the target without drasync's marks for this source */
	DS_REFUSAL_OWNER,	 /* drasync writes it for another source */
	DS_REFUSAL_MAX
};

/** "namespace", "pod_security", ... ; "unknown" outside the enum. */
const char *ds_refusal_name(enum ds_refusal r);

/** The sources[] entry of source, NULL when there is none (or no `sources`). Borrowed. */
const ds_source_grant *ds_grant_of(const ds_target_config *cfg, const char *source);

/**
 * Whether source may write source namespace ns. On a refusal why says which
 * part of the file decides (sources[i].namespaces, namespaceMappings, no entry).
 * @return true when granted
 */
bool ds_grant_namespace(const ds_target_config *cfg, const char *source, const char *ns, char *why,
			size_t size);

/** The Pod Security level of source's pod specs (baseline without an entry). */
enum ds_pss_level ds_grant_pod_security(const ds_target_config *cfg, const char *source);

/** Whether source may ask for a planned failover (sources[].relocate). */
bool ds_grant_relocate(const ds_target_config *cfg, const char *source);

/**
 * The file against the authorized-sources names: a sources[] name that is not
 * among them fails with file:line:col. @return 0, or -EINVAL
 */
int ds_grant_check_names(const ds_target_config *cfg, const char *const *authorized, size_t n,
			 ds_err *err);

/**
 * What an authorized source may write, in one line for the start-up log:
 * "namespaces ml-team, team-* (sources[0]), podSecurity baseline" or
 * "nothing: no entry in sources". @return buf
 */
const char *ds_grant_describe(const ds_target_config *cfg, const char *source, char *buf,
			      size_t size);

/** Whether source may write nothing at all under cfg. */
bool ds_grant_is_empty(const ds_target_config *cfg, const char *source);

#endif
