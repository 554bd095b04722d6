// Node's amqplib against rr's queues, for tests/interop/ (docs/how-to/other-clients.md): one action per
// run, its answer as one JSON line on stdout.
//
//   node client.js URL check QUEUE                  checkQueue (a passive declare)
//   node client.js URL assert QUEUE                 assertQueue with amqplib's defaults
//   node client.js URL publish QUEUE ID BODY        sendToQueue on a confirm channel
//   node client.js URL publish-typed QUEUE ID       the same, with a header of each of
//                                                   amqplib's types
//   node client.js URL take QUEUE N SETTLE          get up to N messages, settle each:
//                                                   ack, reject, nack, requeue-reject,
//                                                   requeue-nack
"use strict";
const amqp = require("amqplib");

async function main() {
  const [url, action, queue, ...rest] = process.argv.slice(2);
  const connection = await amqp.connect(url);
  // a channel the broker closes (a 406) is an error event: answered below, not thrown again
  connection.on("error", () => {});
  try {
    if (action === "publish-typed") {
      // amqplib's own types for header values (its {"!": type, value} form, and defaults)
      const channel = await connection.createConfirmChannel();
      const [id] = rest;
      const headers = {
        "a-decimal": { "!": "decimal", value: { places: 2, digits: 12345 } },
        "a-float": { "!": "float", value: 1.5 },
        "a-double": 0.25,
        "a-int8": { "!": "int8", value: -5 },
        "a-int16": { "!": "int16", value: -300 },
        "a-int32": { "!": "int32", value: 7 },
        "a-int64": { "!": "int64", value: 5 },
        "a-number": 42,
        "a-text": "héllo",
        "a-bytes": Buffer.from([0, 1, 2]),
        "a-time": { "!": "timestamp", value: 1700000000 },
        "a-bool": true,
        "a-void": null,
        "a-table": { inner: { "!": "int16", value: 3 } },
        "a-array": [1, "b"],
      };
      channel.sendToQueue(queue, Buffer.from(id), { messageId: id, headers, persistent: true });
      await channel.waitForConfirms();
      return { ok: true };
    }
    if (action === "publish") {
      const channel = await connection.createConfirmChannel();
      const [id, body] = rest;
      channel.sendToQueue(queue, Buffer.from(body), { messageId: id, persistent: true });
      await channel.waitForConfirms();
      return { ok: true };
    }
    const channel = await connection.createChannel();
    channel.on("error", () => {});
    if (action === "check") {
      const answer = await channel.checkQueue(queue);
      return { ok: true, messages: answer.messageCount };
    }
    if (action === "assert") {
      const answer = await channel.assertQueue(queue);
      return { ok: true, messages: answer.messageCount };
    }
    if (action === "take") {
      const [count, settle] = rest;
      const taken = [];
      for (let n = 0; n < Number(count); n += 1) {
        const message = await channel.get(queue);
        if (message === false) break;
        const headers = message.properties.headers || {};
        taken.push({ id: message.properties.messageId, count: headers["x-delivery-count"] ?? null });
        if (settle === "ack") channel.ack(message);
        else if (settle === "reject") channel.reject(message, false);
        else if (settle === "nack") channel.nack(message, false, false);
        else if (settle === "requeue-reject") channel.reject(message, true);
        else if (settle === "requeue-nack") channel.nack(message, false, true);
      }
      await channel.close();
      return { ok: true, taken };
    }
    throw new Error(`unknown action ${action}`);
  } finally {
    await connection.close().catch(() => {});
  }
}

main().then(
  (answer) => process.stdout.write(JSON.stringify(answer) + "\n"),
  (error) => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(error.message || error) }) + "\n");
  },
);
