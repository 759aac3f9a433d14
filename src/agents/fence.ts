/**
 * User text inside a prompt, fenced: `<name>` … `</name>` around it, so the model can tell the data
 * it is given from the instructions around it. An opening or closing tag of that name inside the
 * text could end the fence early (and what follows would read as instructions): its `<` becomes a
 * fullwidth `＜`, so the fence closes only where this function closed it.
 */
export function fenced(name: string, text: string): string {
  const tag = new RegExp(`<(?=\\s*/?\\s*${name}\\b)`, "gi");
  return `<${name}>\n${text.replace(tag, "\uFF1C")}\n</${name}>`;
}
