/**
 * The commands the docs give an operator, read out of the Markdown (shell code blocks and inline
 * code), fastly.toml's comments and the configuration's own messages, and split into words as a
 * shell would: continuations joined, comments, redirections and variable assignments dropped,
 * `$(…)` and `<placeholders>` kept as one word each. test/doc-commands.test.ts runs them.
 */

export interface DocCommand {
  /** Where it is written: `docs/deploying.md:142`. */
  readonly where: string;
  /** The words after the program (`npx fastly` or `npm`), placeholders filled in. */
  readonly args: readonly string[];
  readonly program: 'fastly' | 'npm';
  /** Elided with `…`: only its command and flag names can be checked, not that it is complete. */
  readonly partial: boolean;
}

/** What a `<placeholder>` word becomes: a value every flag parses (a host, an ID, a version number). */
export const PLACEHOLDER_VALUE = '1';
/** What a `$(…)` word becomes. */
export const SUBSTITUTION_VALUE = 'value';

/**
 * The words of one logical line, each simple command apart (`&&`, `||`, `;`, `|`, `&` end one).
 * A `<` followed by a word and a `>` before the next `<` is a placeholder, as the docs write them
 * (`<origin host>`); a `<` followed by a space is a redirection.
 */
export function shellWords(line: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | undefined;
  let skipNext = false;
  const end = (): void => {
    if (word === undefined) return;
    if (skipNext) skipNext = false;
    else commands[commands.length - 1]!.push(word);
    word = undefined;
  };
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === ' ' || c === '\t') {
      end();
    } else if (c === '#' && word === undefined) {
      break;
    } else if (c === "'") {
      const close = line.indexOf("'", i + 1);
      word = (word ?? '') + line.slice(i + 1, close < 0 ? line.length : close);
      i = close < 0 ? line.length : close;
    } else if (c === '"') {
      let j = i + 1;
      let text = '';
      while (j < line.length && line[j] !== '"') {
        if (line.startsWith('$(', j)) {
          j = closingParen(line, j + 2);
          text += SUBSTITUTION_VALUE;
        } else {
          text += line[j];
        }
        j++;
      }
      word = (word ?? '') + text;
      i = j;
    } else if (line.startsWith('$(', i)) {
      i = closingParen(line, i + 2);
      word = (word ?? '') + SUBSTITUTION_VALUE;
    } else if (c === '<' && /^<[^\s<>][^<>]*>/.test(line.slice(i))) {
      const close = line.indexOf('>', i);
      const inner = word !== undefined || (line[close + 1] !== undefined && !/\s/.test(line[close + 1]!));
      word = (word ?? '') + (inner ? 'example' : PLACEHOLDER_VALUE);
      i = close;
    } else if (c === '<' || c === '>') {
      // A redirection: `< file`, `> file`, `>> file`, `2>&1`; a descriptor number before it goes too.
      if (word !== undefined && /^\d+$/.test(word)) word = undefined;
      end();
      while (line[i + 1] === '>' || line[i + 1] === '<' || line[i + 1] === '&') i++;
      if (line[i] === '&') {
        while (/\d/.test(line[i + 1] ?? '')) i++;
      } else {
        skipNext = true;
      }
    } else if (c === ';' || c === '|' || c === '&') {
      end();
      if (line[i + 1] === c) i++;
      commands.push([]);
    } else {
      word = (word ?? '') + c;
    }
  }
  end();
  return commands.filter((words) => words.length > 0);
}

function closingParen(line: string, from: number): number {
  let depth = 1;
  for (let j = from; j < line.length; j++) {
    if (line[j] === '(') depth++;
    else if (line[j] === ')' && --depth === 0) return j;
  }
  return line.length;
}

/** A simple command's words as one of ours, when it runs the Fastly CLI or npm. */
export function asDocCommand(words: readonly string[], where: string): DocCommand | undefined {
  let rest = [...words];
  while (rest.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(rest[0]!)) rest = rest.slice(1);
  const partial = rest.some((w) => w.includes('…'));
  // An elided value after a flag (`--enable …`) stands for some value; anything else elided is left out.
  const args = (from: number): string[] =>
    rest.slice(from).flatMap((w, i, all) => (!w.includes('…') ? [w] : /^--?[a-z]/.test(all[i - 1] ?? '') && !all[i - 1]!.includes('=') ? [PLACEHOLDER_VALUE] : []));
  if (rest[0] === 'npx' && rest[1] === 'fastly') return { where, args: args(2), program: 'fastly', partial };
  if (rest[0] === 'fastly') return { where, args: args(1), program: 'fastly', partial };
  if (rest[0] === 'npm') return { where, args: args(1), program: 'npm', partial };
  return undefined;
}

/** The commands of a shell text that starts at line `firstLine` of `file`. */
function commandsOfShell(text: string, file: string, firstLine: number): DocCommand[] {
  const found: DocCommand[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]!}`;
    for (const words of shellWords(line)) {
      const command = asDocCommand(words, `${file}:${firstLine + start}`);
      if (command !== undefined) found.push(command);
    }
  }
  return found;
}

/** Inline code that is a command: it starts with the program. */
const INLINE_COMMAND = /^(npx fastly|fastly|npm) /;

/**
 * A Markdown page's commands: every line of its shell code blocks (```sh, ```bash, ```shell or no
 * language) and every inline code span that starts with `npx fastly`, `fastly` or `npm`.
 */
export function commandsOfMarkdown(text: string, file: string): DocCommand[] {
  const found: DocCommand[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*```(\w*)/.exec(lines[i]!);
    if (fence !== null) {
      const start = i + 1;
      while (i + 1 < lines.length && !/^\s*```/.test(lines[i + 1]!)) i++;
      if (['', 'sh', 'bash', 'shell', 'console'].includes(fence[1]!)) found.push(...commandsOfShell(lines.slice(start, i + 1).join('\n'), file, start + 1));
      i++;
      continue;
    }
    for (const span of lines[i]!.matchAll(/`([^`]+)`/g)) {
      if (INLINE_COMMAND.test(span[1]!)) found.push(...commandsOfShell(span[1]!, file, i + 1));
    }
  }
  return found;
}

/** fastly.toml's comments: inline code in them that is a command, across the comment's lines. */
export function commandsOfTomlComments(text: string, file: string): DocCommand[] {
  const found: DocCommand[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('#')) continue;
    const start = i;
    let comment = '';
    while (i < lines.length && lines[i]!.startsWith('#')) comment += ` ${lines[i++]!.replace(/^#\s?/, '')}`;
    for (const span of comment.matchAll(/`([^`]+)`/g)) {
      if (INLINE_COMMAND.test(span[1]!)) found.push(...commandsOfShell(span[1]!, file, start + 1));
    }
  }
  return found;
}

/** Commands inside a message of ours (`… (npx fastly service backend update …)`). */
export function commandsOfMessage(text: string, where: string): DocCommand[] {
  return [...text.matchAll(/npx fastly [^()`]*/g)].flatMap((m) => commandsOfShell(m[0].trim(), where, 0).map((c) => ({ ...c, where })));
}
