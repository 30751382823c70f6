#ifndef DRASYNC_VERIFY_INTERNAL_H
#define DRASYNC_VERIFY_INTERNAL_H

/*
 * What the parts of verify share: verify.c (items, text, the loop),
 * verify_gather.c (reading objects, against the cluster), verify_judge.c (the
 * judgement, pure) and verify_store.c (the verifications in the ledger).
 */

#include "drasync/verify.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A bounded text being written: a reason, a selector. */
struct text {
	char *buf;
	size_t size, len;
};

/* Append to t, cut at its size. */
void ds_verify_addf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A clause, separated from what came before by "; ". */
void ds_verify_clause(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The string at a dotted path of obj, or NULL. */
const char *ds_verify_str_at(const json_t *obj, const char *dotted);

/* A condition of type `type` in status.conditions, or NULL. */
const json_t *ds_verify_condition(const json_t *obj, const char *type);

/* Whether condition c (may be NULL) has this status. */
bool ds_verify_cond_is(const json_t *c, const char *status);

/* The condition's message, else its reason, else "". */
const char *ds_verify_cond_text(const json_t *c);

#endif
