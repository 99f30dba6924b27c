import { createContext } from 'preact';
import { useContext, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';

interface Question {
  readonly title: string;
  readonly detail: string;
  readonly action: string;
  readonly danger: boolean;
  readonly answer: (yes: boolean) => void;
}

type Ask = (title: string, detail: string, action: string, danger?: boolean) => Promise<boolean>;

const ConfirmContext = createContext<Ask>(() => Promise.resolve(false));

/** Every destructive action asks first, in a dialog of the page's own (not the browser's). */
export function ConfirmProvider(props: { children: ComponentChildren }) {
  const [question, setQuestion] = useState<Question | undefined>(undefined);
  const ask: Ask = (title, detail, action, danger = true) =>
    new Promise((resolve) =>
      setQuestion({
        title,
        detail,
        action,
        danger,
        answer: (yes) => {
          setQuestion(undefined);
          resolve(yes);
        },
      }),
    );
  return (
    <ConfirmContext.Provider value={ask}>
      {props.children}
      {question && (
        <div class="modal-backdrop">
          <div class="modal" role="dialog" aria-modal="true" aria-labelledby="confirm-title">
            <h2 id="confirm-title">{question.title}</h2>
            <p>{question.detail}</p>
            <div class="modal-actions">
              <button type="button" onClick={() => question.answer(false)}>
                Keep
              </button>
              <button type="button" class={question.danger ? 'danger' : 'primary'} data-testid="confirm" onClick={() => question.answer(true)}>
                {question.action}
              </button>
            </div>
          </div>
        </div>
      )}
    </ConfirmContext.Provider>
  );
}

export function useConfirm(): Ask {
  return useContext(ConfirmContext);
}
