// Node's amqplib against rr's queues, for tests/interop/ (docs/interop.md): one action per
// run, its answer as one JSON line on stdout.
//
//   node client.js URL check QUEUE                  checkQueue (a passive declare)
//   node client.js URL assert QUEUE                 assertQueue with amqplib's defaults
//   node client.js URL publish QUEUE ID BODY        sendToQueue on a confirm channel
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
