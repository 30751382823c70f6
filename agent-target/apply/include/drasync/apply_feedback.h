#ifndef DRASYNC_APPLY_FEEDBACK_H
#define DRASYNC_APPLY_FEEDBACK_H

/*
 * What the apply stage tells the sources, for the receiver (SPEC §6): the
 * apply results queued in the ledger (object_state.h, apply_results) and the
 * unapplied backlog that sets the credit. It has its own connection to the
 * ledger and is used on the receiver's thread only.
 */

#include "drasync/err.h"
#include "drasync/receiver.h"

typedef struct ds_apply_feedback ds_apply_feedback;

int ds_apply_feedback_open(ds_apply_feedback **out, const char *ledger_path, ds_err *err);
void ds_apply_feedback_free(ds_apply_feedback *fb);

/** The receiver's feedback functions, reading through fb. */
void ds_apply_feedback_bind(ds_apply_feedback *fb, ds_receiver_feedback *out);

#endif
