#include "drasync/apply_feedback.h"

#include "drasync/log.h"
#include "drasync/object_state.h"

#include <errno.h>
#include <stdlib.h>

struct ds_apply_feedback {
	ds_object_state *st;
};

int ds_apply_feedback_open(ds_apply_feedback **out, const char *ledger_path, ds_err *err)
{
	ds_apply_feedback *fb = calloc(1, sizeof(*fb));
	int rc;

	if (!fb)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_object_state_open(&fb->st, ledger_path, err);
	if (rc < 0) {
		free(fb);
		return rc;
	}
	*out = fb;
	return 0;
}

void ds_apply_feedback_free(ds_apply_feedback *fb)
{
	if (!fb)
		return;
	ds_object_state_free(fb->st);
	free(fb);
}

/* A ledger that cannot be read costs the sources their results for now, not the session. */
static void ledger_trouble(const char *what, const ds_err *err)
{
	char q[600];

	ds_log(DS_LOG_WARN, "feedback_error", "what=%s error=%s", what,
	       ds_log_quote(err->msg, q, sizeof(q)));
}

static int results(void *ud, const char *source, uint64_t epoch, ds_wire_result *out, size_t max,
		   size_t *n, int64_t *token)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};
	int rc = ds_object_state_results(fb->st, source, epoch, out, max, n, token, &err);

	if (rc < 0)
		ledger_trouble("apply results", &err);
	return rc;
}

static void sent(void *ud, const char *source, uint64_t epoch, int64_t token)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};

	if (ds_object_state_results_sent(fb->st, source, epoch, token, &err) < 0)
		ledger_trouble("apply results sent", &err);
}

static int unapplied(void *ud, uint64_t *n)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};
	int rc = ds_object_state_unapplied(fb->st, n, &err);

	if (rc < 0)
		ledger_trouble("unapplied count", &err);
	return rc;
}

void ds_apply_feedback_bind(ds_apply_feedback *fb, ds_receiver_feedback *out)
{
	out->results = results;
	out->sent = sent;
	out->unapplied = unapplied;
	out->ud = fb;
}
