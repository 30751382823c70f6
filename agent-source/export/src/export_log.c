#include "drasync/export_log.h"

#include "drasync/log.h"

void ds_export_log_event(void *ud, const ds_exporter_event *ev)
{
	(void)ud;
	if (ev)
		ds_log(ev->level, ev->name, "%s", ev->fields ? ev->fields : "");
}
