/**
 * The comm target `agent_kernel.notebook`: applies the edits and cell runs of agent_kernel's
 * notebook tools to the notebook open in JupyterLab 4 or Notebook 7, so they show at once,
 * without a reload, and opens the session panel (`%agent panel`) beside it.
 *
 * For each notebook panel's kernel it registers the comm target. The kernel opens a comm to it
 * when a tool first needs the open notebook (or `%agent panel` asks for the panel), and sends
 * requests `{id, op, ...}`; each is answered `{id, ok: true, ...}` or `{id, ok: false, error}`.
 * Edits change the notebook's model only: the person saves, as with their own edits.
 */
import { ICodeCellModel, ICellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject, JSONValue } from '@lumino/coreutils';

const TARGET = 'agent_kernel.notebook';

type CellJSON = {
  cell_type: 'code' | 'markdown' | 'raw';
  id: string;
  source: string;
  metadata?: JSONObject;
};

type Request =
  | { id: string; op: 'hello' }
  | { id: string; op: 'read' }
  | { id: string; op: 'insert'; after: string | null; cell: CellJSON }
  | { id: string; op: 'replace'; cell: CellJSON }
  | { id: string; op: 'delete'; cell_id: string }
  | { id: string; op: 'outputs'; cell_id: string; outputs: JSONObject[]; execution_count: number | null }
  | { id: string; op: 'panel'; model_id: string; title: string };

type Reply = JSONObject;

/** Opens the session panel showing the widget `modelId` beside `panel`; says where it went. */
export type PanelOpener = (panel: NotebookPanel, modelId: string, title: string) => string;

/** Raised for a request the open notebook cannot carry out; its message goes back to the kernel. */
class EditError extends Error {}

function indexOf(panel: NotebookPanel, cellId: string): number {
  const cells = panel.content.model!.cells;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i).id === cellId) {
      return i;
    }
  }
  throw new EditError(`No cell with id ${cellId} in the open notebook ${panel.context.path}.`);
}

function cellIds(panel: NotebookPanel): string[] {
  const ids: string[] = [];
  const cells = panel.content.model!.cells;
  for (let i = 0; i < cells.length; i++) {
    ids.push(cells.get(i).id);
  }
  return ids;
}

function asShared(cell: CellJSON): JSONObject {
  const shared: JSONObject = { cell_type: cell.cell_type, id: cell.id, source: cell.source, metadata: cell.metadata ?? {} };
  if (cell.cell_type === 'code') {
    shared.outputs = [];
    shared.execution_count = null;
  }
  return shared;
}

async function apply(panel: NotebookPanel, request: Request, openPanel: PanelOpener): Promise<Reply> {
  const model = panel.content.model;
  if (!model) {
    throw new EditError(`The notebook ${panel.context.path} has no model yet.`);
  }
  const shared = model.sharedModel;
  switch (request.op) {
    case 'hello':
      return { path: panel.context.path };
    case 'read':
      return { path: panel.context.path, notebook: model.toJSON() as unknown as JSONObject };
    case 'insert': {
      const index = request.after === null ? 0 : indexOf(panel, request.after) + 1;
      shared.insertCell(index, asShared(request.cell) as never);
      return { index, cell_ids: cellIds(panel) };
    }
    case 'replace': {
      const index = indexOf(panel, request.cell.id);
      const old: ICellModel = model.cells.get(index);
      if (old.type !== request.cell.cell_type) {
        shared.transact(() => {
          shared.deleteCell(index);
          shared.insertCell(index, asShared(request.cell) as never);
        });
      } else {
        shared.transact(() => {
          old.sharedModel.setSource(request.cell.source);
          old.sharedModel.setMetadata(request.cell.metadata ?? {});
          if (old.type === 'code') {
            (old as ICodeCellModel).outputs.clear();
            (old as ICodeCellModel).executionCount = null;
          }
        });
      }
      return { index, cell_ids: cellIds(panel) };
    }
    case 'delete': {
      const index = indexOf(panel, request.cell_id);
      shared.deleteCell(index);
      return { index, cell_ids: cellIds(panel) };
    }
    case 'outputs': {
      const index = indexOf(panel, request.cell_id);
      const cell = model.cells.get(index);
      if (cell.type !== 'code') {
        throw new EditError(`Cell ${request.cell_id} of ${panel.context.path} is a ${cell.type} cell; only code cells have outputs.`);
      }
      const code = cell as ICodeCellModel;
      code.outputs.clear();
      for (const output of request.outputs) {
        code.outputs.add(output as never);
      }
      code.executionCount = request.execution_count;
      return { index };
    }
    case 'panel':
      return { where: openPanel(panel, request.model_id, request.title) };
    default:
      throw new EditError(`Unknown request ${JSON.stringify((request as { op?: JSONValue }).op)}.`);
  }
}

/** Serves the comm the kernel of `panel` opens: one request at a time, each answered. */
function serve(panel: NotebookPanel, comm: Kernel.IComm, openPanel: PanelOpener): void {
  let queue: Promise<void> = Promise.resolve();
  comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
    const request = msg.content.data as unknown as Request;
    queue = queue.then(async () => {
      let reply: Reply;
      try {
        reply = { id: request.id, ok: true, ...(await apply(panel, request, openPanel)) };
      } catch (error) {
        reply = { id: request.id, ok: false, error: error instanceof Error ? error.message : String(error) };
      }
      if (!comm.isDisposed) {
        comm.send(reply);
      }
    });
  };
  const closeWithPanel = (): void => {
    if (!comm.isDisposed) {
      comm.close();
    }
  };
  panel.disposed.connect(closeWithPanel);
  comm.onClose = () => {
    panel.disposed.disconnect(closeWithPanel);
  };
}

/** Registers the comm target on `panel`'s kernel, and again on each kernel it changes to. */
export function watch(panel: NotebookPanel, openPanel: PanelOpener): void {
  const register = (kernel: Kernel.IKernelConnection | null | undefined): void => {
    kernel?.registerCommTarget(TARGET, (comm: Kernel.IComm, open: KernelMessage.ICommOpenMsg) => {
      if (panel.isDisposed) {
        comm.close();
        return;
      }
      serve(panel, comm, openPanel);
      const request = open.content.data as unknown as Request;
      if (request && request.id) {
        void apply(panel, request, openPanel).then(
          reply => !comm.isDisposed && comm.send({ id: request.id, ok: true, ...reply }),
          error => !comm.isDisposed && comm.send({ id: request.id, ok: false, error: String(error) })
        );
      }
    });
  };
  register(panel.sessionContext.session?.kernel);
  panel.sessionContext.kernelChanged.connect((_, change) => register(change.newValue));
}
