"""Pure. The console's one style sheet (``/static/console.css``): a layout that stacks at
narrow widths, actions apart and discard styled as destructive (docs/reference/console.md)."""

from __future__ import annotations

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
header { background: #3b3b6d; padding: .5em 1em; }
header a { color: #fff; text-decoration: none; font-weight: bold; }
header a.runs { font-weight: normal; margin-left: 1.5em; }
main { padding: 1em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
td.n, td.depth { text-align: right; }
pre.body, pre.diff { background: #f6f6f6; padding: .5em; overflow-x: auto; max-width: 100%; }
.note { color: #8a5a00; }
.error { color: #b00020; font-weight: bold; }
svg.spark { color: #3b3b6d; }
button.confirm { font-weight: bold; }
button.danger { color: #fff; background: #b00020; border: 1px solid #7a0016; }
td.actions form { display: inline-block; margin: 0 1.5em .3em 0; }
td.actions form.discard { margin-left: 1em; }
div.actions form { display: inline-block; margin: 0 1.5em .3em 0; }
div.actions form.discard { margin-left: 1em; }
td.pick input { width: 1.4em; height: 1.4em; }
form.select { margin: .5em 0; }
form.select button { margin: 0 1em .3em 0; }
input, button { font-size: 1em; }
button { padding: .3em .8em; }
@media (max-width: 700px) {
  main { padding: .5em; }
  table.groups, table.groups tbody, table.groups tr, table.groups td,
  table.letters, table.letters tbody, table.letters tr, table.letters td { display: block; }
  table.groups thead, table.letters thead { display: none; }
  table.groups tr, table.letters tr { border: 1px solid #ccc; margin: 0 0 1em; }
  table.groups td, table.letters td { border: none; border-bottom: 1px solid #eee; }
  table.groups td[data-label]::before, table.letters td[data-label]::before {
    content: attr(data-label) ": "; font-weight: bold; }
  td { overflow-wrap: anywhere; }
  table.queues, table.timeline, table.props, table.headers, table.runs {
    display: block; overflow-x: auto; }
  td.actions form, div.actions form { display: block; margin: .8em 0; }
  td.actions form.discard, div.actions form.discard { margin: 2em 0 .5em; }
  form.select button { display: block; margin: .6em 0; }
  textarea { width: 100%; box-sizing: border-box; }
  pre.body, pre.diff { white-space: pre-wrap; word-break: break-all; }
}
"""
"""The one style sheet (``/static/console.css``)."""
