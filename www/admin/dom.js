// Building the DOM safely: elements are made with createElement and their
// text with text nodes, so nothing the API returns is ever parsed as HTML
// (`<b>` in API data shows as `<b>`, it is not markup).

/**
 * What `el` and `append` take as children: nodes and text, nested in arrays
 * as a view builds them; null, undefined and false are left out.
 * @typedef {Node | string | number | boolean | null | undefined | Child[]} Child
 */

/**
 * An element of the page by its id (the page's ids are fixed: index.html).
 * @template {HTMLElement} [E=HTMLElement]
 * @param {string} id
 * @returns {E}
 */
export const $ = (id) => /** @type {E} */ (document.getElementById(id));

/**
 * `el("td", { class: "num", title: "…" }, "text", otherNode)`: an element
 * whose attributes are set with setAttribute and whose string children
 * become text nodes. `on…` props are event listeners; `dataset` sets data-*
 * attributes.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [props]
 * @param {Child[]} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

/**
 * Appends `children` to `node` (see Child); returns `node`.
 * @template {Element} N
 * @param {N} node
 * @param {Child[]} children
 * @returns {N}
 */
export function append(node, children) {
  // Nested as deep as a view builds them (typed loosely: a recursive type flattened to any depth is too deep for the checker).
  for (const child of /** @type {unknown[]} */ (children).flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

/**
 * An SVG element (charts), like `el` but with attributes only.
 * @param {string} tag
 * @param {Record<string, string | number>} [attributes]
 * @param {Child[]} children
 * @returns {SVGElement}
 */
export function svg(tag, attributes = {}, ...children) {
  const node = /** @type {SVGElement} */ (document.createElementNS(SVG, tag));
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  append(node, children);
  return node;
}
