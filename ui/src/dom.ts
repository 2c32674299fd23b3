// A tiny element builder: the console is small enough not to need a framework.

export type Child = Node | string | number | null | undefined | false | Child[];

type Attrs = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
    } else if (key === 'value' || key === 'checked' || key === 'disabled') {
      (el as unknown as Record<string, unknown>)[key] = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function mount(el: Element, ...children: Child[]) {
  el.replaceChildren();
  append(el, children);
}

/** A modal over the page: `title`, `body`, then `actions` (each closes it with its answer). */
function modal<T>(title: string, body: Child[], actions: [string, string, () => T][], focus?: HTMLElement): Promise<T> {
  return new Promise((resolve) => {
    const overlay = h(
      'div',
      { class: 'overlay' },
      h(
        'div',
        { class: 'dialog', role: 'dialog', 'aria-label': title },
        h('h3', {}, title),
        ...body,
        h(
          'div',
          { class: 'actions' },
          actions.map(([label, cls, answer]) =>
            h('button', { class: cls, onclick: () => { overlay.remove(); resolve(answer()); } }, label),
          ),
        ),
      ),
    );
    document.body.appendChild(overlay);
    focus?.focus();
  });
}

/** A modal asking to confirm `what`; resolves true only on the confirm button. */
export function confirmDialog(title: string, body: Child, confirmLabel: string): Promise<boolean> {
  return modal(title, [h('div', {}, body)], [
    ['Cancel', '', () => false],
    [confirmLabel, 'danger', () => true],
  ]);
}

/** A modal asking for a whole number between `min` and `max` (every `step` from `min`);
 * resolves it, or null on Cancel. */
export function numberDialog(title: string, body: Child, value: number, min: number, max: number, step: number): Promise<number | null> {
  const input = h('input', { type: 'number', min: String(min), max: String(max), step: String(step), value: String(value), 'aria-label': title }) as HTMLInputElement;
  return modal(title, [h('div', {}, body), input], [
    ['Cancel', '', () => null],
    ['Apply', '', () => Number(input.value)],
  ], input);
}

export function age(seconds: number): string {
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}
