// Finding the exact text of a member of a JSON answer: the server embeds
// each envelope in its answers as the bytes it stored, signed and sent,
// and a signature covers those bytes, which JSON.stringify(JSON.parse())
// does not always give back (key order, escapes, number forms). The text
// must be valid JSON (JSON.parse of it succeeded): the scan checks nothing.

/** The span [start, end) of a JSON value in its text. */
type Span = readonly [start: number, end: number];

function skipSpace(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

/** Returns the index just past the string whose opening quote is at i. */
function skipString(s: string, i: number): number {
  for (i++; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x5c) i++; // a backslash escapes the next character
    else if (c === 0x22) return i + 1;
  }
  return s.length;
}

/** Returns the index just past the value that starts at i (after any space). */
function skipValue(s: string, i: number): number {
  i = skipSpace(s, i);
  const c = s[i];
  if (c === '"') return skipString(s, i);
  if (c === "{" || c === "[") {
    let depth = 0;
    for (; i < s.length; i++) {
      const d = s[i];
      if (d === '"') i = skipString(s, i) - 1;
      else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        if (--depth === 0) return i + 1;
      }
    }
    return s.length;
  }
  while (i < s.length && !",}] \t\n\r".includes(s[i] as string)) i++; // a number, true, false, null
  return i;
}

/** The members of the object whose value starts at span[0], by name, each with its value's span. */
export function members(s: string, span: Span): Map<string, Span> {
  const out = new Map<string, Span>();
  let i = skipSpace(s, span[0]);
  if (s[i] !== "{") return out;
  i = skipSpace(s, i + 1);
  while (i < span[1] && s[i] === '"') {
    const keyEnd = skipString(s, i);
    const name = JSON.parse(s.slice(i, keyEnd)) as string;
    i = skipSpace(s, keyEnd);
    if (s[i] !== ":") break;
    const start = skipSpace(s, i + 1);
    const end = skipValue(s, start);
    out.set(name, [start, end]);
    i = skipSpace(s, end);
    if (s[i] !== ",") break;
    i = skipSpace(s, i + 1);
  }
  return out;
}

/** The elements of the array whose value starts at span[0], each as its span. */
export function elements(s: string, span: Span): Span[] {
  const out: Span[] = [];
  let i = skipSpace(s, span[0]);
  if (s[i] !== "[") return out;
  i = skipSpace(s, i + 1);
  while (i < span[1] && s[i] !== "]") {
    const end = skipValue(s, i);
    out.push([i, end]);
    i = skipSpace(s, end);
    if (s[i] !== ",") break;
    i = skipSpace(s, i + 1);
  }
  return out;
}

/** The span of the whole text. */
export function whole(s: string): Span {
  return [0, s.length];
}
