// A webhookd receiver in Node: the official Standard Webhooks package
// checks the raw bytes, then parses them. npm install standardwebhooks@1.3.0
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.WEBHOOK_SECRET); // the endpoint's "whsec_…"

http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes, exactly as signed
    let event;
    try {
      // Checks webhook-timestamp (5 minutes) and each signature in
      // webhook-signature (two during a rotation), then JSON.parse.
      event = wh.verify(body, req.headers);
    } catch (err) {
      console.log(`rejected: ${err.message}`);
      res.writeHead(401).end();
      return;
    }
    // Process the event once per webhook-id: it may come more than once.
    console.log(`verified ${req.headers["webhook-id"]} ${event.type}`);
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8000), "127.0.0.1");
