/* STATE_DIR/agent.json: written atomically, read back, a dead pid is "not running". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/agent_state.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_agent_state__round_trip_and_liveness(void **state)
{
	char *dir = tu_mkdtemp("agent-state");
	ds_agent_state st = {0}, back;
	bool running = false;
	ds_err err = {0};
	pid_t child;

	(void)state;
	assert_int_equal(ds_agent_state_read(dir, &back, &running, &err), -ENOENT);
	st.pid = getpid();
	snprintf(st.endpoint, sizeof(st.endpoint), "tcp://dr.example.net:7450");
	st.connected = true;
	st.since_ms = 1764576000123;
	snprintf(st.last_event, sizeof(st.last_event), "session_open");
	snprintf(st.last_detail, sizeof(st.last_detail), "epoch \"7\"");
	snprintf(st.schedule, sizeof(st.schedule), "cron");
	st.next_pass_ms = 1764576900000;
	assert_int_equal(ds_agent_state_write(dir, &st, &err), 0);
	assert_int_equal(ds_agent_state_read(dir, &back, &running, &err), 0);
	assert_true(running);
	assert_int_equal(back.pid, getpid());
	assert_string_equal(back.endpoint, st.endpoint);
	assert_true(back.connected);
	assert_true(back.since_ms == st.since_ms);
	assert_string_equal(back.last_detail, st.last_detail);
	assert_string_equal(back.schedule, "cron");
	assert_true(back.next_pass_ms == st.next_pass_ms);

	/* A pid that has exited is not running. */
	child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	st.pid = child;
	assert_int_equal(ds_agent_state_write(dir, &st, &err), 0);
	assert_int_equal(ds_agent_state_read(dir, &back, &running, &err), 0);
	assert_false(running);
	free(dir);
}

static void test_agent_state__damaged_file_is_reported(void **state)
{
	char *dir = tu_mkdtemp("agent-state");
	char path[1024];
	ds_agent_state back;
	bool running;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/agent.json", dir);
	tu_write_file(path, "{\"pid\": 12");
	assert_int_equal(ds_agent_state_read(dir, &back, &running, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "agent.json"));
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_agent_state__round_trip_and_liveness),
	    cmocka_unit_test(test_agent_state__damaged_file_is_reported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
