#include "transport_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

int ds_sock_tune(void *sock, const ds_transport_tuning *t)
{
	int64_t maxmsg = (int64_t)t->limits.max_frame;
	int ttl = t->heartbeat_timeout_ms * 2;

	if (zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &t->heartbeat_ivl_ms, sizeof(int)) ||
	    zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &t->heartbeat_timeout_ms, sizeof(int)) ||
	    zmq_setsockopt(sock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof(int)) ||
	    zmq_setsockopt(sock, ZMQ_LINGER, &t->linger_ms, sizeof(int)) ||
	    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) ||
	    zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &t->reconnect_ivl_ms, sizeof(int)) ||
	    zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &t->reconnect_ivl_max_ms, sizeof(int)))
		return -zmq_errno();
	return 0;
}

int ds_monitor_start(struct ds_monitor *m, void *zctx, void *sock)
{
	static atomic_uint counter;
	int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
		     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
		     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
		     ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_LISTENING | ZMQ_EVENT_BIND_FAILED;
	int linger = 0;

	snprintf(m->endpoint, sizeof(m->endpoint), "inproc://ds-monitor-%u",
		 atomic_fetch_add(&counter, 1));
	if (zmq_socket_monitor(sock, m->endpoint, events) != 0)
		return -zmq_errno();
	m->pair = zmq_socket(zctx, ZMQ_PAIR);
	if (!m->pair)
		return -zmq_errno();
	zmq_setsockopt(m->pair, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(m->pair, m->endpoint) != 0) {
		int e = zmq_errno();
		zmq_close(m->pair);
		m->pair = NULL;
		return -e;
	}
	return 0;
}

int ds_monitor_read(struct ds_monitor *m, uint16_t *event, uint32_t *value, char *addr,
		    size_t addrlen)
{
	zmq_msg_t a, b;
	int got = 0;

	if (!m->pair)
		return 0;
	zmq_msg_init(&a);
	zmq_msg_init(&b);
	if (zmq_msg_recv(&a, m->pair, ZMQ_DONTWAIT) < 0)
		goto out;
	if (!zmq_msg_more(&a) || zmq_msg_recv(&b, m->pair, 0) < 0)
		goto out;
	if (zmq_msg_size(&a) >= 6) {
		const uint8_t *d = zmq_msg_data(&a);
		size_t l = zmq_msg_size(&b);
		memcpy(event, d, 2);
		memcpy(value, d + 2, 4);
		if (l >= addrlen)
			l = addrlen - 1;
		memcpy(addr, zmq_msg_data(&b), l);
		addr[l] = '\0';
		got = 1;
	}
out:
	zmq_msg_close(&a);
	zmq_msg_close(&b);
	return got;
}

void ds_monitor_stop(struct ds_monitor *m, void *sock)
{
	if (sock)
		zmq_socket_monitor(sock, NULL, 0);
	if (m->pair)
		zmq_close(m->pair);
	m->pair = NULL;
}

const char *ds_handshake_reason(uint16_t event, uint32_t value, char *buf, size_t len)
{
	const char *why = NULL;

	if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
		snprintf(buf, len,
			 "authentication refused by the server (ZAP status %u: key not "
			 "authorized)",
			 value);
		return buf;
	}
	if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
		if (value == EPIPE || value == ECONNRESET)
			snprintf(buf, len,
				 "the peer hung up during the CURVE handshake (a "
				 "plaintext peer, or one with the wrong server key?)");
		else if (value == EAGAIN || value == ETIMEDOUT)
			snprintf(buf, len,
				 "no complete handshake within the handshake timeout (a silent "
				 "or stalled peer)");
		else
			snprintf(buf, len, "handshake failed: %s", strerror((int)value));
		return buf;
	}
	switch (value) {
	case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
		why = "security mechanism mismatch (a plaintext peer, or CURVE on one side only)";
		break;
	case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
		why = "cryptographic error (wrong server key?)";
		break;
	case ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE:
		why = "CURVE key exchange failed";
		break;
	case ZMQ_PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND:
	case ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY:
	case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME:
		why = "malformed ZMTP handshake (not a drasync/ZeroMQ peer?)";
		break;
	default:
		break;
	}
	if (why)
		snprintf(buf, len, "%s", why);
	else
		snprintf(buf, len, "handshake protocol error 0x%x", value);
	return buf;
}

void ds_peer_ip(const char *peer, char *ip, size_t len)
{
	char *colon;

	snprintf(ip, len, "%s", peer);
	colon = strrchr(ip, ':');
	if (colon)
		*colon = '\0';
}
