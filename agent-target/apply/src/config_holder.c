#include "drasync/config_holder.h"

#include "drasync/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct retired {
	ds_target_config *cfg;
	/* The applier may read cfg until a pass beyond this one begins; UINT64_MAX:
	 * the applier has not been given its successor yet. */
	uint64_t pass;
};

struct ds_config_holder {
	pthread_mutex_t mu; /* guards all below */
	ds_target_config *cur;
	struct retired *old; /* in the order replaced, so by pass */
	size_t n_old, old_cap;
};

int ds_config_holder_new(ds_config_holder **out, ds_target_config **cfg)
{
	ds_config_holder *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->mu, NULL);
	h->cur = *cfg;
	*cfg = NULL;
	*out = h;
	return 0;
}

void ds_config_holder_free(ds_config_holder *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n_old; i++)
		ds_target_config_unref(h->old[i].cfg);
	free(h->old);
	ds_target_config_unref(h->cur);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

ds_target_config *ds_config_holder_get(ds_config_holder *h)
{
	ds_target_config *cfg;

	pthread_mutex_lock(&h->mu);
	cfg = ds_target_config_ref(h->cur);
	pthread_mutex_unlock(&h->mu);
	return cfg;
}

const ds_target_config *ds_config_holder_peek(const ds_config_holder *h)
{
	return h->cur;
}

int ds_config_holder_set(ds_config_holder *h, ds_target_config **cfg)
{
	int rc;

	pthread_mutex_lock(&h->mu);
	rc = ds_grow((void **)&h->old, &h->old_cap, h->n_old + 1, sizeof(*h->old));
	if (rc == 0) {
		h->old[h->n_old++] = (struct retired){h->cur, UINT64_MAX};
		h->cur = *cfg;
		*cfg = NULL;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

void ds_config_holder_handed(ds_config_holder *h, uint64_t pass)
{
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->n_old; i++)
		if (h->old[i].pass == UINT64_MAX)
			h->old[i].pass = pass;
	pthread_mutex_unlock(&h->mu);
}

size_t ds_config_holder_passed(ds_config_holder *h, uint64_t passes)
{
	size_t n_done = 0, left;

	pthread_mutex_lock(&h->mu);
	/* In the order replaced, so the passes only grow along the list. */
	while (n_done < h->n_old && h->old[n_done].pass < passes)
		ds_target_config_unref(h->old[n_done++].cfg);
	if (n_done) {
		memmove(h->old, h->old + n_done, (h->n_old - n_done) * sizeof(*h->old));
		h->n_old -= n_done;
	}
	left = h->n_old;
	pthread_mutex_unlock(&h->mu);
	return left;
}
