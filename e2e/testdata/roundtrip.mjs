// Counts the bodies (a JSON array of strings, in the file named by the
// first argument) that JSON.stringify(JSON.parse(body)) changes, and
// prints "<changed> of <all>". TestReceiving_RoundTrip runs it.
import { readFileSync } from "node:fs";

const bodies = JSON.parse(readFileSync(process.argv[2], "utf8"));
const changed = bodies.filter((b) => JSON.stringify(JSON.parse(b)) !== b).length;
console.log(`${changed} of ${bodies.length}`);
