/**
 * The session panel (`%agent panel`): the kernel's panel widget, shown beside the notebook.
 *
 * The kernel displays one output with two forms: `application/vnd.agent-kernel.panel+json`,
 * which the renderer here draws as a line saying where the panel is, and the ipywidgets view
 * (the panel inline, under a line saying no side panel is possible), which front ends without
 * this extension draw. It then asks, over the comm target `agent_kernel.notebook` (op `panel`),
 * for the panel widget `model_id` to be opened: a split beside the notebook in JupyterLab, the
 * right sidebar in Notebook 7. The widget is drawn through the notebook panel's own rendermime,
 * whose ipywidgets renderer knows that notebook's kernel, so the panel's clicks reach it as a
 * cell output's do. One panel per notebook: asking again shows it again, with the new model if
 * the kernel has changed.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { NotebookPanel } from '@jupyterlab/notebook';
import { MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Panel, Widget } from '@lumino/widgets';

/** The kernel's output that says a panel was asked for. */
export const PANEL_MIME = 'application/vnd.agent-kernel.panel+json';
const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';
/** Before the ipywidgets renderer (rank -10), so this line shows instead of the inline panel. */
const PANEL_RANK = -20;

const GONE =
  'The kernel this panel belonged to has gone (restarted or shut down). Run %agent panel again ' +
  'for the new kernel.';

/** The side-area widget holding one notebook's session panel. */
export class SessionPanelWidget extends Panel {
  modelId = '';
  private renderer: IRenderMime.IRenderer | null = null;
  private readonly note = new Widget();
  private runs: HTMLElement | null = null;
  private stick = true;

  constructor(readonly notebook: NotebookPanel) {
    super();
    this.id = `agent-kernel-panel-${notebook.id}`;
    this.addClass('ak-session-panel');
    this.title.label = 'Agent';
    this.title.caption = `The agent session of ${notebook.context.path}`;
    this.title.closable = true;
    Object.assign(this.node.style, {
      display: 'flex', flexDirection: 'column', padding: '8px', boxSizing: 'border-box', minWidth: '280px',
      background: 'var(--jp-layout-color1)', overflow: 'hidden'
    });
    this.note.node.style.color = 'var(--jp-content-font-color2)';
    this.addWidget(this.note);
    // Capturing: the ipywidgets text box stops its keys from reaching the page.
    this.node.addEventListener('keydown', event => this.onKey(event), true);
    // New output in the run list keeps it scrolled to the end, unless the person scrolled up.
    new MutationObserver(() => this.follow()).observe(this.node, { childList: true, subtree: true, characterData: true });
  }

  /** Shows the kernel's panel widget `modelId` (drawn once per model). */
  async showModel(modelId: string, title: string): Promise<void> {
    this.title.label = title || 'Agent';
    if (modelId === this.modelId && this.renderer && !this.renderer.isDisposed) {
      return;
    }
    this.clear();
    this.modelId = modelId;
    let renderer: IRenderMime.IRenderer;
    try {
      renderer = this.notebook.content.rendermime.createRenderer(WIDGET_VIEW);
    } catch (error) {
      this.say('This page cannot show widgets (ipywidgets is missing from JupyterLab), so the panel cannot show here.');
      return;
    }
    Object.assign(renderer.node.style, { flex: '1 1 auto', minHeight: '0', height: '100%', overflow: 'hidden' });
    this.renderer = renderer;
    this.addWidget(renderer);
    await renderer.renderModel(new MimeModel({
      data: { [WIDGET_VIEW]: { model_id: modelId, version_major: 2, version_minor: 0 } },
      trusted: true
    }));
  }

  /** The kernel went: its widgets with it. */
  kernelGone(): void {
    if (this.modelId) {
      this.clear();
      this.say(GONE);
    }
  }

  private clear(): void {
    this.renderer?.dispose();
    this.renderer = null;
    this.runs = null;
    this.modelId = '';
    this.say('');
  }

  private say(text: string): void {
    this.note.node.textContent = text;
    this.note.setHidden(!text);
  }

  /** Ctrl+Enter (Cmd+Enter) in the prompt box clicks Send. */
  private onKey(event: KeyboardEvent): void {
    const target = event.target as HTMLElement | null;
    if (event.key !== 'Enter' || !(event.ctrlKey || event.metaKey) || !target?.closest('.ak-panel-prompt')) {
      return;
    }
    const send = this.node.querySelector('.ak-panel-send') as HTMLButtonElement | null;
    if (send && !send.disabled) {
      event.preventDefault();
      event.stopPropagation();
      send.click();
    }
  }

  private follow(): void {
    if (!this.runs || !this.node.contains(this.runs)) {
      this.runs = this.node.querySelector('.ak-panel-runs');
      this.runs?.addEventListener('scroll', () => {
        const runs = this.runs!;
        this.stick = runs.scrollHeight - runs.scrollTop - runs.clientHeight < 48;
      });
    }
    if (this.runs && this.stick) {
      this.runs.scrollTop = this.runs.scrollHeight;
    }
  }
}

/** What the cell shows where this extension put the panel beside the notebook. */
class PanelLine extends Widget implements IRenderMime.IRenderer {
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = (model.data[PANEL_MIME] || {}) as { session?: string };
    this.addClass('ak-panel-line');
    this.node.style.color = 'var(--jp-content-font-color2)';
    this.node.textContent =
      `The panel of agent session '${data.session ?? 'default'}' is beside the notebook; ` +
      '%agent panel brings it back if you close it.';
  }
}

/** Opens the session panels of notebooks, one per notebook. */
export class SessionPanels {
  private readonly panels = new WeakMap<NotebookPanel, SessionPanelWidget>();

  /** `inMain`: JupyterLab, whose main area can be split; else (Notebook 7) the right sidebar. */
  constructor(private readonly app: JupyterFrontEnd, private readonly inMain: boolean) {}

  /** Draws the `%agent panel` output of `notebook`'s cells as a line (see the module docs). */
  watch(notebook: NotebookPanel): void {
    notebook.content.rendermime.addFactory(
      { safe: true, mimeTypes: [PANEL_MIME], createRenderer: () => new PanelLine() },
      PANEL_RANK
    );
    const gone = (): void => this.panels.get(notebook)?.kernelGone();
    notebook.sessionContext.kernelChanged.connect(gone);
    notebook.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        gone();
      }
    });
  }

  /** Shows the widget `modelId` beside `notebook`; returns where (`main` or `right`). */
  open(notebook: NotebookPanel, modelId: string, title: string): string {
    let side = this.panels.get(notebook);
    if (!side || side.isDisposed) {
      const created = new SessionPanelWidget(notebook);
      notebook.disposed.connect(() => created.dispose());
      this.panels.set(notebook, created);
      side = created;
    }
    void side.showModel(modelId, title);
    if (!side.isAttached) {
      if (this.inMain) {
        this.app.shell.add(side, 'main', { mode: 'split-right', ref: notebook.id, activate: false });
      } else {
        this.app.shell.add(side, 'right', { rank: 1000 });
      }
    }
    if (!side.isVisible) {
      this.app.shell.activateById(side.id);
    }
    return this.inMain ? 'main' : 'right';
  }
}
