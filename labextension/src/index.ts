/**
 * agent-kernel-live: agent_kernel's front-end extension for JupyterLab 4 and Notebook 7.
 *
 * - the notebook tools' edits and cell runs show in the open notebook at once (`live.ts`);
 * - `%agent panel` opens the session's conversation beside the notebook (`panel.ts`);
 * - `%%agent` cells are highlighted as Markdown in a Python notebook, `%%python` cells as
 *   Python in the Agent kernel (`languages.ts`).
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { watchLanguages } from './languages';
import { watch } from './live';
import { SessionPanels } from './panel';

const live: JupyterFrontEndPlugin<void> = {
  id: 'agent-kernel-live:plugin',
  description: "Shows agent_kernel's notebook edits and cell runs in the open notebook, and the session panel beside it.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, labShell: ILabShell | null): void => {
    const panels = new SessionPanels(app, labShell !== null);
    const open = (panel: NotebookPanel, modelId: string, title: string): string => panels.open(panel, modelId, title);
    const each = (panel: NotebookPanel): void => {
      panels.watch(panel);
      watch(panel, open);
    };
    tracker.forEach(each);
    tracker.widgetAdded.connect((_, panel) => each(panel));
  }
};

const languages: JupyterFrontEndPlugin<void> = {
  id: 'agent-kernel-live:languages',
  description: 'Highlights %%agent cells as Markdown and %%python cells of the Agent kernel as Python.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker, languages: IEditorLanguageRegistry): void => {
    tracker.forEach(panel => watchLanguages(panel, languages));
    tracker.widgetAdded.connect((_, panel) => watchLanguages(panel, languages));
  }
};

export default [live, languages];
