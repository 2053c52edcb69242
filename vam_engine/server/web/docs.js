// The API's endpoints from /openapi.json, listed as text (no script from elsewhere: the page's
// content policy allows this server's own scripts only).
(async () => {
  const box = document.getElementById("endpoints");
  const spec = await (await fetch("/openapi.json")).json();
  box.textContent = "";
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const item = document.createElement("section");
      const head = document.createElement("h3");
      head.textContent = `${method.toUpperCase()} ${path}`;
      const doc = document.createElement("pre");
      const params = (op.parameters || []).map((p) => `${p.name} (${p.in}${p.required ? ", required" : ""})`);
      doc.textContent = [op.summary || "", op.description || "", params.length ? "parameters: " + params.join(", ") : ""]
        .filter(Boolean).join("\n");
      item.append(head, doc);
      box.append(item);
    }
  }
})();
