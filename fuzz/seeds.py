#!/usr/bin/env python3
"""Writes the committed seed corpus of each fuzz target (fuzz/corpus/<target>/):
a handful of valid and near-valid inputs per target, so that a short run
starts from inputs that reach deep into each parser. Run it again after
changing a target's input layout; libFuzzer finds the rest."""

import base64
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
seeds = {}


def add(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    seeds.setdefault(target, {})[name] = data


# nats_connection: a control byte (bit 0 tls, bit 1 a 64-byte max_payload,
# bit 2 a token, the rest the size of the reads it compares with one read),
# then what the server sends.
INFO = (b'INFO {"server_id":"N1","version":"2.10.7","max_payload":1048576,'
        b'"headers":true,"nonce":"lCQmdWJpL9U0Jb8","connect_urls":["10.0.0.1:4222"]}\r\n')
HANDSHAKE = INFO + b"+OK\r\nPONG\r\n"
add("nats_connection", "session", bytes([0x00]) + HANDSHAKE
    + b"PING\r\nMSG a.b 1 5\r\nhello\r\nMSG x 2 r.1 0\r\n\r\n"
    + b"HMSG a.c 1 _INBOX.x 22 24\r\nNATS/1.0 503\r\nA: b\r\n\r\nhi\r\n"
    + b"MSG q.1 3 2\r\nq1\r\nMSG q.2 3 2\r\nq2\r\nMSG q.3 3 2\r\nq3\r\n")
add("nats_connection", "cut_in_ones", bytes([0x04]) + HANDSHAKE + b"MSG a.b 1 3\r\nabc\r\nPING\r\n")
add("nats_connection", "cut_in_sevens", bytes([0x30]) + HANDSHAKE
    + b"HMSG a.b 1 31 33\r\nNATS/1.0\r\nTrace: 1\r\nTrace: 2\r\n\r\nok\r\n")
add("nats_connection", "tls_required", bytes([0x00]) + b'INFO {"tls_required":true}\r\n')
add("nats_connection", "small_max_payload", bytes([0x02]) + b'INFO {"max_payload":64}\r\nPONG\r\nMSG a.b 1 65\r\n')
add("nats_connection", "errors", bytes([0x08]) + HANDSHAKE
    + b"-ERR 'Permissions Violation for Subscription to \"x\"'\r\n-ERR 'Authorization Violation'\r\n")
add("nats_connection", "bad_headers", bytes([0x00]) + HANDSHAKE
    + b"HMSG a.b 1 5 5\r\nHTTP/\r\nHMSG a.b 2 9 20\r\nNATS/1.0 5x3\r\n")
add("nats_connection", "wrong_size", bytes([0x00]) + HANDSHAKE + b"MSG a.b 1 2\r\nabc\r\n")
add("nats_connection", "msg_before_info", bytes([0x00]) + b"MSG a.b 1 0\r\n\r\n")
# The claiming engine's two differences from one read (found by this target):
# it refuses a message by its line before the payload comes, and the host
# delivers a claimed payload before the CRLF after it arrives.
add("nats_connection", "claim_before_info", bytes([0x08]) + b"MSG a.b 1 9\r\n0123")
add("nats_connection", "claim_without_crlf", bytes([0x30]) + HANDSHAKE + b"MSG a.b 1 12\r\nclaimed-body")

# nats_headers: a header block or an INFO document.
add("nats_headers", "plain", "NATS/1.0\r\nTrace-Id: abc\r\nX: 1\r\nX: 2\r\n\r\n")
add("nats_headers", "status", "NATS/1.0 408 Request Timeout\r\nNats-Pending: 1\r\n\r\n")
add("nats_headers", "no_responders", "NATS/1.0 503\r\n\r\n")
add("nats_headers", "bad_status", "NATS/1.0 5x3\r\n\r\n")
add("nats_headers", "no_colon", "NATS/1.0\r\nnocolon\r\n\r\n")
add("nats_headers", "info", INFO[5:-2])
add("nats_headers", "info_bad", b'{"max_payload":-1}')

# tunnel_frame: two bytes (a body length the host claims, halved), then
# one websocket message.
def frame(stream, kind, payload=b""):
    return struct.pack(">IB", stream, kind) + payload

for name, message in [
    ("hello", frame(0, 0, b"\x01\x01\x01")),
    ("open", frame(1, 1, b"inference")),
    ("reply_ok", frame(1, 2, b"\x00")),
    ("reply_refused", frame(1, 2, b"\x02too busy \xc3\xa9")),
    ("data", frame(1, 3, b"body bytes")),
    ("window", frame(1, 4, struct.pack(">I", 65536))),
    ("fin", frame(1, 5)),
    ("reset", frame(1, 6, b"\x02")),
    ("ping", frame(0, 7, struct.pack(">Q", 9))),
    ("pong", frame(0, 8, struct.pack(">Q", 9))),
    ("hello_v2", frame(0, 0, b"\x02\x01\x01")),
    ("open_on_zero", frame(0, 1, b"x")),
    ("window_zero", frame(1, 4, b"\x00\x00\x00\x00")),
]:
    add("tunnel_frame", name, b"\x00\x00" + message)
add("tunnel_frame", "data_header_split", b"\x00\x10" + frame(3, 3))

# tunnel_session: a setup byte (bit 0 frontend, bit 1 bulk lane, bit 2 the
# peer's HELLO already in), then operations: 0-3 a peer message (length
# byte, bytes), 4 a DATA of a chosen size, 5 accept, 6 refuse, 7 consumed,
# 8 reserve_send, 9 finish/reset, 10 open_stream, 11 tick (and drain).
def msg(data):
    return bytes([0, len(data)]) + data

worker = (bytes([0x00])
          + msg(frame(0, 0, b"\x01\x01\x01"))
          + msg(frame(1, 1, b"inference"))
          + bytes([11, 0, 0, 0])                  # drain: learn stream 1
          + bytes([5, 0])                          # accept it
          + bytes([4, 0, 0x01, 0x00])              # 256 bytes of DATA
          + bytes([11, 0, 0, 0])
          + bytes([7, 0, 0, 0, 1, 0])              # consume them
          + bytes([8, 0, 0, 0, 0x10, 0])           # reserve 4 KiB
          + msg(frame(1, 4, struct.pack(">I", 4096)))
          + msg(frame(1, 5))                       # peer FIN
          + bytes([9, 0, 0])                       # our FIN
          + msg(frame(0, 7, struct.pack(">Q", 1)))
          + bytes([11, 0x10, 0, 0]))
add("tunnel_session", "worker_stream", worker)
frontend = (bytes([0x05])
            + bytes([10, 9]) + b"inference"      # open stream 1
            + bytes([8, 0, 0, 0, 0, 64])         # early data
            + msg(frame(1, 2, b"\x00"))          # accepted
            + msg(frame(1, 4, struct.pack(">I", 1)))
            + bytes([11, 0x40, 0, 0])            # idle: PING
            + bytes([11, 0x40, 0, 0])            # no PONG: lost
            + bytes([6, 0, 3, 200]))
add("tunnel_session", "frontend_stream", frontend)
add("tunnel_session", "violations", bytes([0x04])
    + msg(frame(1, 1, b"a")) + msg(frame(3, 3)) + bytes([11, 0, 0, 0])
    + bytes([4, 0, 0xff, 0xff]) + msg(frame(1, 4, b"\x7f\xff\xff\xff"))
    + msg(frame(1, 1, b"again")))
add("tunnel_session", "bad_hello", bytes([0x00]) + msg(frame(0, 0, b"\x01\x02\x01")))

# pgbus_notification: the text of one notification.
for name, text in [
    ("inline", "m jobs.1   aGk="),
    ("inline_reply_headers", "m jobs.1 _INBOX.t.3 YQ:Yg,ZHVw:MQ aGVsbG8gd29ybGQ="),
    ("inline_empty", "m jobs.1 _INBOX.t.3 YQ:Yg "),
    ("spilled", "s 7 jobs.1 _INBOX.t.3 YQ:Yg"),
    ("spilled_max", "s 9223372036854775807 jobs.é  "),
    ("not_ours", "hello world"),
    ("bad_id", "s 0 jobs.1  "),
    ("bad_header", "m jobs.1  YQ:Yg= "),
    ("headers_only", "Q29udGVudC1UeXBl:YXBwbGljYXRpb24vanNvbg"),
]:
    add("pgbus_notification", name, text)

# pgbus_engine: operations (see the target): 0-2 a notification on the
# channel, 3 on the wake channel, 4-5 answer a waiting query, 6 the clock,
# 7 subscribe, 8 publish, 9 request, 10 a lost connection, 11 unsubscribe.
def note(text, op=0):
    return bytes([op, len(text)]) + text.encode()

answer_one = bytes([4, 0, 1, 1, 1, 1, 1]) + b"1"   # the first query: one row, "1"
setup = answer_one * 2                         # the table, then LISTEN checked
add("pgbus_engine", "fan_out", setup
    + bytes([7, 0, 0, 1])                         # subscription 1 on jobs.*
    + note("m jobs.1   aGk=")
    + note("m jobs.1 _INBOX.t.3 YQ:Yg aGVsbG8=")
    + note("s 7 jobs.1  ")                        # spilled: a read follows
    + bytes([4, 0xff, 1, 1, 1, 1, 5]) + b"hello"
    + bytes([8, 0, 0, 0, 20])
    + bytes([6, 0x10, 0]))
add("pgbus_engine", "claim_queue", setup
    + bytes([7, 1, 3, 0])                         # subscription 2 on work.render, group g
    + note("work.render", 3)
    + bytes([4, 0xff, 1, 1, 4, 1, 1]) + b"9" + bytes([1, 3]) + b"u-1" + bytes([1, 0, 1, 2]) + b"hi"
    + bytes([8, 3, 1, 3]) + b"u-2" + bytes([0, 4])
    + bytes([8, 4, 0, 0, 0])                      # ack _claim.1
    + bytes([10, 0])
    + bytes([6, 0xff, 0xff]))
add("pgbus_engine", "not_ours", setup + bytes([7, 0, 1, 1]) + note("hello world") + note("s 0 jobs.1  ")
    + bytes([9, 0, 1, 0, 100]) + bytes([6, 0, 20]))

# worker_head: a stream's bytes; the head is the first line.
for name, text in [
    ("frontend", '{"replica":"r1","method":"POST","path":"/v1/chat/completions",'
                 '"headers":[["content-type","application/json"]]}\n{"model":"m"}'),
    ("get", '{"replica":"r1","method":"GET","path":"/v1/models?limit=1"}\n'),
    ("escape", '{"replica":"r\\u00e9","method":"POST","path":"/v1/%2e%2e/admin","headers":[]}\n'),
    ("reserved", '{"replica":"r1","method":"POST","path":"/v1/x","headers":[["Host","evil"]]}\n'),
    ("no_newline", '{"replica":"r1","method":"DELETE","path":"//evil/v1/"}'),
]:
    add("worker_head", name, text)

# direct_hello: a connection's bytes; the line is up to the first newline,
# read as a challenge, a hello and an answer (and the whole input as a
# refusal message).
NONCE_HEX = "a5" * 32
for name, text in [
    ("challenge", "SWY2 " + NONCE_HEX + "\n"),
    ("challenge_upper", "SWY2 " + NONCE_HEX.upper() + "\n"),
    ("challenge_short", "SWY2 " + NONCE_HEX[2:] + "\n"),
    ("hello", "SWY2 inference " + "07" * 32 + "\nrequest bytes"),
    ("hello_empty_service", "SWY2  " + "07" * 32 + "\n"),
    ("hello_crlf", "SWY2 echo " + "07" * 32 + "\r\n"),
    ("hello_v1", "SWY1 echo " + "07" * 32 + "\n"),
    ("ok", "OK\n"),
    ("unknown", "UNKNOWN \r\n"),
    ("overloaded", "OVERLOADED\n"),
    ("refused", "REFUSED too busy \u00e9\n"),
    ("refused_empty", "REFUSED \n"),
    ("refused_long", "REFUSED " + "x" * 1100 + "\n"),
    ("undelivered", "UNDELIVERED the session ended\n"),
    ("no_newline", "OK"),
]:
    add("direct_hello", name, text)
add("direct_hello", "not_utf8", b"REFUSED \xff\xfe\n")

# v1_body: a /v1 request body, read for the model, the limits, `stream`
# and the prompt's text; the near-valid ones are refused as a tree refuses.
for name, text in [
    ("chat", '{"model":"demo","max_tokens":16,"stream":true,'
             '"messages":[{"role":"user","content":"hello there"}]}'),
    ("parts", '{"model":"m","messages":[{"content":[{"type":"text","text":"abc"},'
              '{"type":"image_url","image_url":{"url":"x"}},"loose",{"text":5}]},'
              '{"content":null},"no message",{"content":"a","content":"bb"}]}'),
    ("completion", '{"model":"m","prompt":"line\\nbreak \\u00e9","max_completion_tokens":9}'),
    ("embeddings", '{"model":"m","input":"a sentence","encoding_format":"float"}'),
    ("odd_types", '{"model":5,"max_tokens":-1,"max_completion_tokens":8.0,"stream":"yes"}'),
    ("duplicates", '{"model":"a","model":"b","stream":true,"stream":false}'),
    ("escaped_keys", '{"mo\\u0064el":"m","max\\u005ftokens":4294967296}'),
    ("lone_surrogate", '{"model":"m","x":"\\ud800"}'),
    ("not_an_object", '["model","demo"]'),
    ("cut", '{"model":"m","messages":[{"content":"ab'),
    ("trailing", '{"model":"m"} x'),
    ("deep", '{"model":"m","x":' + "[" * 130 + "]" * 130 + "}"),
]:
    add("v1_body", name, text)

# plugin_signature: the upload's x-switchyard-signature header, base64 of a
# signature file's JSON (a well-formed one whose signature does not verify,
# one with a short key, and plain junk).
SIGNATURE = {"format": "switchyard-plugin-signature/v1", "key_id": "0123456789abcdef",
             "public_key": "ab" * 32, "signature": "cd" * 64, "name": "max-tokens",
             "version": "1.0.0", "kind": "policy", "sha256": "ef" * 32}
add("plugin_signature", "well_formed", base64.b64encode(json.dumps(SIGNATURE).encode()))
add("plugin_signature", "short_key",
    base64.b64encode(json.dumps(dict(SIGNATURE, public_key="ab")).encode()))
add("plugin_signature", "not_base64", "{not base64}")

# federation_messages: one message from a peer: a handshake message, a
# call on the link's call stream, or (first line) a remote inference head.
KEY = "ab" * 32
for name, text in [
    ("hello", '{"type":"hello","version":1,"purpose":"join","lane":"inference",'
              '"cluster_id":"cluster_1","label":"alpha","public_key":"' + KEY + '",'
              '"url":"http://a:8080","nonce":"' + "01" * 32 + '","join_token":"syj_x"}'),
    ("challenge", '{"type":"challenge","cluster_id":"c","label":"b","public_key":"' + KEY + '",'
                  '"nonce":"' + "02" * 32 + '","signature":"' + "cd" * 64 + '"}'),
    ("refused", '{"type":"refused","code":"invalid_join_token","message":"no"}'),
    ("request_access", '{"call":"request_access","id":"req_1","operations":["inference",'
                       '"inference:manage"],"note":"n"}'),
    ("manage", '{"call":"manage","grant":"g","operation_id":"op","action":"start",'
               '"service":"s","revision":3}'),
    ("answer", '{"status":409,"body":{"error":{"code":"operation_conflict","message":"m"}}}'),
    # A float serde_json's default parser reads one unit off (fixed by its
    # `float_roundtrip` feature): a body passed on keeps its numbers.
    ("answer_float", '{"status":401,"body":{"error":{"cost":4.1111111111111113e+129}}}'),
    ("inference_head", '{"grant":"g","service":"chat","path":"/v1/chat/completions",'
                       '"tokens":16,"hops":["cluster_1"]}\n{"model":"beta/chat"}'),
]:
    add("federation_messages", name, text)

# websocket_frames: a control byte (bit 0 read as the server, the rest the
# size of the pieces), then frames.
def ws(opcode, payload, fin=True, key=None):
    head = bytes([(0x80 if fin else 0) | opcode])
    mask = 0x80 if key else 0
    if len(payload) < 126:
        head += bytes([mask | len(payload)])
    elif len(payload) < 65536:
        head += bytes([mask | 126]) + struct.pack(">H", len(payload))
    else:
        head += bytes([mask | 127]) + struct.pack(">Q", len(payload))
    if key:
        head += key
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


KEY = b"\x37\xfa\x21\x3d"
add("websocket_frames", "server_reads_masked", bytes([0x01 | (7 << 1)])
    + ws(2, b"\x00\x00\x00\x03\x03hello", key=KEY) + ws(9, b"p", key=KEY)
    + ws(8, struct.pack(">H", 1000), key=KEY))
add("websocket_frames", "client_reads_fragments", bytes([3 << 1])
    + ws(1, b"fi", fin=False) + ws(10, b"") + ws(0, b"n"))
add("websocket_frames", "client_reads_long", bytes([0])
    + ws(2, bytes(300)) + ws(2, bytes(65536)))
# A finding: fragmented messages, each of which once held 64 KiB.
add("websocket_frames", "many_fragments", bytes([0x06])
    + b"".join(ws(2, b"f", fin=False) + ws(0, b"n") for _ in range(40)))
add("websocket_frames", "length_claimed_not_sent", bytes([0])
    + b"\x82\x7f" + struct.pack(">Q", 65536))

for target, files in seeds.items():
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
