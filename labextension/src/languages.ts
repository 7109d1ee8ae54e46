/**
 * Each code cell highlighted in the language it is written in, as its first line says.
 *
 * A notebook highlights every code cell in its kernel's language. A `%%agent` cell of a Python
 * notebook (and a `%%prompt` cell) is a prompt, so it is highlighted as Markdown, not with
 * Python's keyword colours on its words; a `%%python` cell of the Agent kernel, whose cells are
 * prompts and highlighted as Markdown, is highlighted as Python. Any other cell keeps the
 * notebook's language. Only the editor's language changes (`cell.model.mimeType`), never the
 * saved notebook.
 *
 * An editor loads the language of each mime type it is given asynchronously and applies the
 * load that ends last, not the one asked for last. So the cell's own language is set only once
 * both it and the notebook's are loaded, after the editor has applied the notebook's.
 */
import { ICellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { NotebookPanel } from '@jupyterlab/notebook';

const MARKDOWN = 'text/x-markdown';
const PYTHON = 'text/x-ipython';
/** First-line cell magics and the language of what follows them. */
const BY_FIRST_LINE: [RegExp, string][] = [
  [/^%%(agent|prompt)(\s|$)/, MARKDOWN],
  [/^%%python(\s|$)/, PYTHON]
];

/** The language `source` is written in, or `fallback` (the notebook's) when it says none. */
export function cellLanguage(source: string, fallback: string): string {
  const first = source.trimStart().split('\n', 1)[0];
  for (const [pattern, mimeType] of BY_FIRST_LINE) {
    if (pattern.test(first)) {
      return mimeType;
    }
  }
  return fallback;
}

/** Keeps each code cell of `panel` in its own language as it is typed and as cells are added. */
export function watchLanguages(panel: NotebookPanel, languages: IEditorLanguageRegistry): void {
  const watched = new WeakSet<ICellModel>();
  const wantedBy = (cell: ICellModel): string =>
    cellLanguage(cell.sharedModel.getSource(), panel.content.codeMimetype);
  const settle = (cell: ICellModel): void => {
    if (cell.type !== 'code' || cell.isDisposed) {
      return;
    }
    const wanted = wantedBy(cell);
    if (cell.mimeType === wanted) {
      return;
    }
    const loads = [languages.getLanguage(cell.mimeType), languages.getLanguage(wanted)];
    void Promise.all(loads).then(() => {
      // A task later, so the editor has applied whatever it was given before.
      setTimeout(() => {
        if (!cell.isDisposed && wantedBy(cell) === wanted && cell.mimeType !== wanted) {
          cell.mimeType = wanted;
        }
      }, 0);
    });
  };
  const watch = (cell: ICellModel): void => {
    if (watched.has(cell)) {
      return;
    }
    watched.add(cell);
    cell.contentChanged.connect(() => settle(cell));
    // The notebook sets every code cell to its language when the kernel's becomes known.
    cell.mimeTypeChanged.connect(() => settle(cell));
    settle(cell);
  };
  const watchAll = (): void => {
    const cells = panel.content.model?.cells;
    if (!cells) {
      return;
    }
    for (let i = 0; i < cells.length; i++) {
      watch(cells.get(i));
    }
  };
  const connect = (): void => {
    const model = panel.content.model;
    if (!model) {
      return;
    }
    model.cells.changed.connect(watchAll);
    watchAll();
  };
  panel.content.modelChanged.connect(connect);
  void panel.context.ready.then(connect);
}
