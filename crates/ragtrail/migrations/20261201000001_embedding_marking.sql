-- How an embedder marked queries and passages (embed::Marking as JSON; '' for none) is part of
-- what produced a space's vectors: the same model with another marking is another space.
alter table embedding_spaces add column marking text not null default '';
alter table embedding_spaces drop constraint embedding_spaces_kind_model_key;
alter table embedding_spaces add constraint embedding_spaces_kind_model_marking_key
    unique (kind, model, marking);
