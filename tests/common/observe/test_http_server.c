/* http_server.h on a real loopback socket: routes, HEAD, 404, 405, bad
 * addresses, a port taken, and requests that are not HTTP. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/http_server.h"
#include "tu_http.h"
#include "tu_site.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void hello(void *ud, ds_http_reply *r)
{
	ds_str_addf(&r->body, "hello %s\n", (const char *)ud);
}

static void unavailable(void *ud, ds_http_reply *r)
{
	(void)ud;
	r->status = 503;
	r->content_type = "text/html; charset=utf-8";
	ds_str_adds(&r->body, "<p>not yet</p>\n");
}

static ds_http_server *start(char *base, size_t size)
{
	const ds_http_route routes[] = {{"/hello", hello, (void *)(uintptr_t) "world"},
					{"/down", unavailable, NULL}};
	ds_http_server *s = NULL;
	ds_err err = {0};

	assert_int_equal(ds_http_server_start(&s, "127.0.0.1:0", routes, 2, &err), 0);
	assert_true(ds_http_server_port(s) > 0);
	snprintf(base, size, "http://127.0.0.1:%d", ds_http_server_port(s));
	return s;
}

static void test_http_server__routes_answer_others_404_405(void **state)
{
	char base[64], url[128];
	ds_http_server *s = start(base, sizeof(base));
	tu_http_reply r;

	(void)state;
	snprintf(url, sizeof(url), "%s/hello", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 200);
	assert_string_equal(r.body, "hello world\n");
	assert_string_equal(r.content_type, "text/plain; charset=utf-8");
	tu_http_dispose(&r);
	tu_http(&r, "HEAD", url);
	assert_int_equal(r.code, 200);
	assert_string_equal(r.body, "");
	tu_http_dispose(&r);
	tu_http(&r, "POST", url);
	assert_int_equal(r.code, 405);
	assert_string_equal(r.allow, "GET, HEAD");
	tu_http_dispose(&r);
	tu_http(&r, "DELETE", url);
	assert_int_equal(r.code, 405);
	tu_http_dispose(&r);
	snprintf(url, sizeof(url), "%s/hello/", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 404);
	tu_http_dispose(&r);
	snprintf(url, sizeof(url), "%s/nope?x=%%00", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 404);
	tu_http_dispose(&r);
	snprintf(url, sizeof(url), "%s/down", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 503);
	assert_string_equal(r.content_type, "text/html; charset=utf-8");
	assert_string_equal(r.body, "<p>not yet</p>\n");
	tu_http_dispose(&r);
	ds_http_server_free(s);
}

/* Bytes that are not HTTP, a huge header, a client that goes away: the
 * server answers the next request as before. */
static void test_http_server__garbage_never_stops_it(void **state)
{
	char base[64], url[128], buf[512];
	ds_http_server *s = start(base, sizeof(base));
	struct sockaddr_in sa = {.sin_family = AF_INET};
	static const char *const junk[] = {
	    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "GET\r\n\r\n",
	    "GET /hello HTTP/9.9\r\n\r\n",
	    "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"};
	char *body;

	(void)state;
	sa.sin_port = htons((uint16_t)ds_http_server_port(s));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]) + 1; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		assert_true(fd >= 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		if (i < sizeof(junk) / sizeof(junk[0])) {
			assert_true(write(fd, junk[i], strlen(junk[i])) > 0);
			shutdown(fd, SHUT_WR);
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		} else {
			/* 100 KiB of header: over the connection's memory limit */
			char *big = malloc(100000);
			assert_non_null(big);
			memset(big, 'a', 100000);
			memcpy(big, "GET /hello HTTP/1.1\r\nX: ", 24);
			(void)!write(fd, big, 100000);
			free(big);
		}
		close(fd);
	}
	snprintf(url, sizeof(url), "%s/hello", base);
	body = tu_http_get(url, 200);
	assert_string_equal(body, "hello world\n");
	free(body);
	ds_http_server_free(s);
}

static void test_http_server__bad_addresses_and_a_taken_port(void **state)
{
	static const char *const bad[] = {"",
					  "9450",
					  "127.0.0.1:",
					  "127.0.0.1:x",
					  "127.0.0.1:70000",
					  "example.com:9450",
					  "[::1:9450",
					  "300.1.1.1:80"};
	const ds_http_route routes[] = {{"/hello", hello, (void *)(uintptr_t) "world"}};
	ds_http_server *s = NULL, *t = NULL;
	char listen[64];
	ds_err err = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		assert_int_equal(ds_http_server_start(&s, bad[i], routes, 1, &err), -EINVAL);
		assert_non_null(strstr(err.msg, bad[i]));
		assert_null(s);
	}
	/* ":port" and localhost are the loopback. */
	snprintf(listen, sizeof(listen), ":%d", tu_free_port());
	assert_int_equal(ds_http_server_start(&s, listen, routes, 1, &err), 0);
	snprintf(listen, sizeof(listen), "localhost:%d", ds_http_server_port(s));
	memset(&err, 0, sizeof(err));
	assert_true(ds_http_server_start(&t, listen, routes, 1, &err) < 0);
	assert_null(t);
	assert_non_null(strstr(err.msg, "cannot listen"));
	ds_http_server_free(s);
	ds_http_server_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http_server__routes_answer_others_404_405),
	    cmocka_unit_test(test_http_server__garbage_never_stops_it),
	    cmocka_unit_test(test_http_server__bad_addresses_and_a_taken_port),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
