#include "drasync/monitor_hooks.h"

#include "drasync/log.h"

static void on_apply(void *ud, const ds_applier_event *ev)
{
	ds_target_monitor_on_apply(ud, ev);
}

static void on_verified(void *ud, const ds_verify_item *it)
{
	ds_target_monitor_on_verified(ud, it);
}

static void on_relocation(void *ud, const char *source, int state)
{
	(void)source; /* a label per source would be unbounded */
	ds_target_monitor_on_relocation(ud, state);
}

static void on_config(void *ud, const ds_target_config *cfg)
{
	ds_target_monitor_set_config(ud, cfg);
}

static void on_listening(void *ud, ds_target_agent *a)
{
	ds_target_monitor_attach(ud, ds_target_agent_applier(a), ds_target_agent_verifier(a));
	ds_target_monitor_attach_quota(ud, ds_target_agent_quota(a));
	ds_target_monitor_attach_link(ud, ds_target_agent_link_stats(a));
	ds_target_monitor_set_listening(ud, ds_target_agent_endpoint(a));
}

void ds_target_monitor_hooks(ds_target_monitor *m, ds_target_agent_hooks *out)
{
	*out = (ds_target_agent_hooks){.ud = m,
				       .on_apply = on_apply,
				       .on_verified = on_verified,
				       .on_link_event = ds_target_monitor_on_link_event, /* logs */
				       .on_link_unauth = ds_target_monitor_on_link_unauth,
				       .on_config = on_config,
				       .on_relocation = on_relocation,
				       .on_listening = on_listening};
}

int ds_target_monitor_start(ds_target_monitor **out, const ds_target_monitor_config *mc,
			    const char *listen, ds_err *err)
{
	ds_target_monitor *m = NULL;
	ds_err e = {0};
	int rc;

	rc = ds_target_monitor_new(&m, mc, err);
	if (rc < 0)
		return rc;
	if (!listen) {
		ds_log(DS_LOG_INFO, "metrics_off",
		       "detail=\"no metrics.listen in the file: no /metrics, /healthz, /readyz or "
		       "status page\"");
		*out = m;
		return 0;
	}
	rc = ds_target_monitor_serve(m, listen, &e);
	if (rc < 0) {
		ds_err_set(err, "%s: %s", mc->config_path ? mc->config_path : "", e.msg);
		ds_target_monitor_free(m);
		return rc;
	}
	ds_log(DS_LOG_INFO, "metrics_listening",
	       "listen=%s paths=\"/metrics /healthz /readyz / (status page)\"", listen);
	*out = m;
	return 0;
}

void ds_target_monitor_stop_run(ds_target_monitor *m, ds_target_agent *a, int rc)
{
	ds_target_monitor_stop(m);
	if (a && ds_target_agent_endpoint(a))
		ds_log(DS_LOG_INFO, "stopped", "exit=%d", rc);
	ds_target_agent_free(a);
	ds_target_monitor_free(m);
}
