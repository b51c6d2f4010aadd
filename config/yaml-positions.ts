// js-yaml 4 returns plain data with no source positions. Its `listener` option reports every
// node as it is opened and closed, with the parser's offset, so we record each node's span and
// map a data path such as volumes[1].block_size back to the line where the key is written.
// Collections are found by identity (the listener's result is the very object that ends up in
// the data); keys are the scalar nodes one level below their mapping that are followed by ':'.

import { load, type State } from 'js-yaml';

export type PathSegment = string | number;

interface SpanNode {
  depth: number;
  start: number;
  end: number;
  kind: string | null;
  result: unknown;
}

export interface PositionedYaml {
  data: unknown;
  /** 1-based line of the deepest part of path that can be found in the source. */
  lineOf(path: readonly PathSegment[]): number | undefined;
}

/** Parses one YAML document; throws js-yaml's YAMLException (with .mark) on a syntax error. */
export function parseYamlWithPositions(text: string, filename: string): PositionedYaml {
  const open: SpanNode[] = [];
  const nodes: SpanNode[] = [];
  const data = load(text, {
    filename,
    listener(event: 'open' | 'close', state: State) {
      if (event === 'open') {
        open.push({ depth: open.length + 1, start: state.position, end: -1, kind: null, result: undefined });
        return;
      }
      const node = open.pop();
      if (!node) return;
      node.end = state.position;
      node.kind = state.kind;
      node.result = state.result;
      if (node.kind !== null) nodes.push(node);
    },
  });
  nodes.sort((a, b) => a.start - b.start || a.depth - b.depth);
  const index = new SourceIndex(text, nodes);
  return { data, lineOf: (path) => index.lineOf(data, path) };
}

class SourceIndex {
  private readonly lineStarts: number[] = [0];
  // A collection can be reported by more than one nested composeNode call (a flow mapping
  // used as a value, for instance); the deepest of them is the one whose children we want.
  private readonly byIdentity = new Map<object, SpanNode>();

  constructor(
    private readonly text: string,
    private readonly nodes: readonly SpanNode[],
  ) {
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) this.lineStarts.push(i + 1);
    for (const n of nodes) {
      if ((n.kind === 'mapping' || n.kind === 'sequence') && typeof n.result === 'object' && n.result !== null) {
        const prev = this.byIdentity.get(n.result);
        if (!prev || n.depth > prev.depth) this.byIdentity.set(n.result, n);
      }
    }
  }

  lineOf(root: unknown, path: readonly PathSegment[]): number | undefined {
    let value = root;
    let container = this.collectionNode(root);
    let line = container ? this.lineAt(this.contentStart(container.start)) : undefined;
    for (const seg of path) {
      if (!container || typeof value !== 'object' || value === null) break;
      const child: unknown = Array.isArray(value)
        ? value[Number(seg)]
        : (value as Record<string, unknown>)[String(seg)];
      const childNode = this.collectionNode(child);
      if (childNode) {
        line = this.lineAt(this.contentStart(childNode.start));
      }
      if (!Array.isArray(value)) {
        const key = this.keyNode(container, String(seg));
        if (key) line = this.lineAt(key.start);
      } else if (!childNode) {
        const item = this.children(container)[Number(seg)];
        if (item) line = this.lineAt(this.contentStart(item.start));
      }
      value = child;
      container = childNode;
    }
    return line;
  }

  private collectionNode(value: unknown): SpanNode | undefined {
    return typeof value === 'object' && value !== null ? this.byIdentity.get(value) : undefined;
  }

  private children(parent: SpanNode): SpanNode[] {
    return this.nodes.filter((n) => n.depth === parent.depth + 1 && n.start >= parent.start && n.end <= parent.end);
  }

  private keyNode(mapping: SpanNode, key: string): SpanNode | undefined {
    return this.children(mapping).find(
      (n) => n.kind === 'scalar' && String(n.result) === key && this.followedByColon(n.end),
    );
  }

  private followedByColon(pos: number): boolean {
    let i = pos;
    while (this.text[i] === ' ' || this.text[i] === '\t') i++;
    return this.text[i] === ':';
  }

  /** Skips the blanks, line breaks and comments between a node's reported offset and its content. */
  private contentStart(pos: number): number {
    let i = pos;
    while (i < this.text.length) {
      const c = this.text[i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
        i++;
      } else if (c === '#') {
        while (i < this.text.length && this.text[i] !== '\n') i++;
      } else {
        break;
      }
    }
    return i;
  }

  private lineAt(pos: number): number {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  }
}
