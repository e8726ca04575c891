//! Keys and the mouse: what each one does in the view on top.

use super::{App, Filter, ListView, MAX_QUERY, View};
use cairn_core::ops::{Op, RestoreRequest};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

impl App {
    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.help {
            self.help = false;
            return;
        }
        if self.view().editing() {
            self.edit_key(key);
            return;
        }
        // A delete waits for `y` as the very next key; anything else keeps the memory.
        if let View::Detail(d) = self.view_mut()
            && d.confirm_delete
            && key.code != KeyCode::Char('y')
        {
            d.confirm_delete = false;
            self.status = "kept".into();
        }
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => self.back(),
            KeyCode::Char('/') => self.start_search(),
            KeyCode::Char('c') if !matches!(self.view(), View::Conflicts(_)) => self.open_conflicts(),
            KeyCode::Char('h') if !self.view().in_history() => self.open_sessions(),
            KeyCode::Char('t') if !matches!(self.view(), View::Trash(_)) => self.open_trash(),
            KeyCode::Char('g') => {
                self.stack.truncate(1);
                self.load_dashboard();
            }
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::PageUp => self.step(-10),
            KeyCode::PageDown | KeyCode::Char(' ') => self.step(10),
            KeyCode::Home => self.jump(false),
            KeyCode::End => self.jump(true),
            KeyCode::Enter | KeyCode::Right => self.open_selected(),
            KeyCode::Tab if matches!(self.view(), View::Search(_)) => self.set_editing(true),
            KeyCode::Char(c) => self.view_key(c, ctrl),
            _ => {}
        }
    }

    /// A key while typing into the search field.
    pub(super) fn edit_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => {
                let empty = match self.view() {
                    View::Search(s) => s.input.is_empty() && s.results.items.is_empty(),
                    View::HistorySearch(s) => s.input.is_empty() && s.results.items.is_empty(),
                    _ => false,
                };
                if empty { self.back() } else { self.set_editing(false) }
            }
            KeyCode::Enter => self.run_search(true),
            KeyCode::Down | KeyCode::Tab => self.set_editing(false),
            KeyCode::Backspace => {
                if let Some(input) = self.input_mut() {
                    input.pop();
                }
                self.run_search(false);
            }
            KeyCode::Char('u') if ctrl => {
                if let Some(input) = self.input_mut() {
                    input.clear();
                }
                self.run_search(false);
            }
            KeyCode::Char('p') if ctrl => self.cycle_filter(Filter::Project),
            KeyCode::Char('t') if ctrl => self.cycle_filter(Filter::Kind),
            KeyCode::Char('o') if ctrl => self.cycle_filter(Filter::Scope),
            KeyCode::Char(c) if !ctrl => {
                if let Some(input) = self.input_mut()
                    && input.chars().count() < MAX_QUERY
                {
                    input.push(c);
                }
                self.run_search(false);
            }
            _ => {}
        }
    }

    pub(super) fn input_mut(&mut self) -> Option<&mut String> {
        match self.view_mut() {
            View::Search(s) => Some(&mut s.input),
            View::HistorySearch(s) => Some(&mut s.input),
            _ => None,
        }
    }

    pub(super) fn set_editing(&mut self, editing: bool) {
        match self.view_mut() {
            View::Search(s) => s.editing = editing,
            View::HistorySearch(s) => s.editing = editing,
            _ => {}
        }
    }

    /// A letter meaning something on this view only.
    pub(super) fn view_key(&mut self, c: char, ctrl: bool) {
        match self.view() {
            View::Search(_) if ctrl => match c {
                'p' => self.cycle_filter(Filter::Project),
                't' => self.cycle_filter(Filter::Kind),
                'o' => self.cycle_filter(Filter::Scope),
                _ => {}
            },
            View::Detail(_) => self.detail_key(c),
            View::Conflicts(_) => self.conflict_key(c),
            View::Trash(list) if c == 'u' => {
                let Some(id) = list.selected().map(|m| m.id) else { return };
                self.write(Op::Restore(RestoreRequest { id }), format!("#{id} restored"));
            }
            View::Dashboard(_) | View::Sessions(_) if c == 'r' => self.reload(),
            _ => {}
        }
    }

    pub(super) fn reload(&mut self) {
        match self.view() {
            View::Dashboard(_) => self.load_dashboard(),
            View::Sessions(_) => {
                self.back();
                self.open_sessions();
            }
            _ => {}
        }
    }

    pub(super) fn step(&mut self, by: isize) {
        match self.view_mut() {
            View::Dashboard(d) => d.recent.step(by),
            View::Search(s) => s.results.step(by),
            View::Detail(d) => d.scroll.by(by),
            View::Conflicts(l) => l.step(by),
            View::Trash(l) => l.step(by),
            View::Sessions(l) => l.step(by),
            View::Turns { list, .. } => list.step(by),
            View::Messages { list, .. } => list.step(by),
            View::Message { list, .. } => list.step(by),
            View::Part { scroll, .. } => scroll.by(by),
            View::HistorySearch(s) => s.results.step(by),
        }
    }

    pub(super) fn jump(&mut self, end: bool) {
        match self.view_mut() {
            View::Detail(d) => d.scroll.jump(end),
            View::Part { scroll, .. } => scroll.jump(end),
            View::Dashboard(d) => d.recent.jump(end),
            View::Search(s) => s.results.jump(end),
            View::Conflicts(l) => l.jump(end),
            View::Trash(l) => l.jump(end),
            View::Sessions(l) => l.jump(end),
            View::Turns { list, .. } => list.jump(end),
            View::Messages { list, .. } => list.jump(end),
            View::Message { list, .. } => list.jump(end),
            View::HistorySearch(s) => s.results.jump(end),
        }
    }

    pub fn on_mouse(&mut self, mouse: MouseEvent) {
        if self.help {
            return;
        }
        match mouse.kind {
            MouseEventKind::ScrollDown => self.step(3),
            MouseEventKind::ScrollUp => self.step(-3),
            MouseEventKind::Down(ratatui::crossterm::event::MouseButton::Left) => self.click(mouse.column, mouse.row),
            _ => {}
        }
    }

    /// A click on a list row selects it; a click on the selected row opens it.
    pub(super) fn click(&mut self, column: u16, row: u16) {
        let area = self.list_area;
        let inside = column >= area.x && column < area.right() && row > area.y && row + 1 < area.bottom();
        if !inside {
            return;
        }
        let row = usize::from(row - area.y - 1);
        let open = match self.view_mut() {
            View::Dashboard(d) => click_row(&mut d.recent, row),
            View::Search(s) => {
                s.editing = false;
                click_row(&mut s.results, row)
            }
            View::Conflicts(l) => click_row(l, row),
            View::Trash(l) => click_row(l, row),
            View::Sessions(l) => click_row(l, row),
            View::Turns { list, .. } => click_row(list, row),
            View::Messages { list, .. } => click_row(list, row),
            View::Message { list, .. } => click_row(list, row),
            View::HistorySearch(s) => click_row(&mut s.results, row),
            View::Detail(_) | View::Part { .. } => false,
        };
        if open {
            self.open_selected();
        }
    }
}

/// Select row `row` of `list`; `true` when it was already selected (a second click opens).
pub(super) fn click_row<T>(list: &mut ListView<T>, row: usize) -> bool {
    let index = list.state.offset() + row;
    if index >= list.items.len() {
        return false;
    }
    let again = list.state.selected() == Some(index);
    list.state.select(Some(index));
    again
}
